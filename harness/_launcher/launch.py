"""Start an agent inside the sandbox: write its config files, close its stdin, exec it.

    python3 /opt/showcase/launch.py -- AGENT ARGV...

The files come filled in from the host in $SHOWCASE_LAUNCH_FILES (base64 of a JSON object
{destination: text}; "~" is $HOME). Standard library only: it runs on the image's python3.
Several agents wait for end of input before their first request, so stdin is /dev/null.
"""

import base64
import json
import os
import sys


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print("launch.py: usage: launch.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    command = argv[argv.index("--") + 1:]
    payload = os.environ.pop("SHOWCASE_LAUNCH_FILES", "")
    files = json.loads(base64.b64decode(payload)) if payload else {}
    for dest, text in files.items():
        path = os.path.expanduser(dest)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o600)  # the per-run key may be in it
        os.replace(tmp, path)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"launch.py: cannot start {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
