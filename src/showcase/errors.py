"""Exit codes and the two kinds of failure that are never a score.

The page's fault is scored (exit 0). These are ours or the user's:
- UserError: bad input (missing file, unknown task, folder already holds a run): exit 2.
- InfraError: the machine cannot do the job (no Chromium, no WebGL, no Docker, a crash): exit 3.
"""


class ShowcaseError(Exception):
    exit_code = 1


class UserError(ShowcaseError):
    exit_code = 2


class InfraError(ShowcaseError):
    exit_code = 3
