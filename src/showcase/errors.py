"""Exit codes and the kinds of failure that are never a score.

The page's fault is scored (exit 0). These are ours or the user's:
- UserError: bad input (missing file, unknown task, folder already holds a run): exit 2.
- InfraError: the machine cannot do the job (no Chromium, no WebGL, no Docker, a crash): exit 3.
- InternalError: a fault in showcase's own check code while scoring one page: exit 1, a bug.
"""

import traceback
from pathlib import Path


class ShowcaseError(Exception):
    exit_code = 1


class UserError(ShowcaseError):
    exit_code = 2


class InfraError(ShowcaseError):
    exit_code = 3


class InternalError(ShowcaseError):
    """A fault in showcase's own check code while scoring one page (exit 1): a bug to report."""

    def __init__(self, exc: BaseException | str):
        if isinstance(exc, BaseException):
            line = str(exc).splitlines()[0] if str(exc) else ""
            where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
            at = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
            exc = (f"showcase's own check code failed ({type(exc).__name__}: {line}{at}); "
                   "this is a bug in showcase, not a fault of the page or the machine")
        super().__init__(exc)
