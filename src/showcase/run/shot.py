"""`shot.sh` inside the sandbox, and the host endpoint it asks through the relay and the gate.

The agent calls `shot.sh game.html`; the script posts to /_showcase/shot on the gate (the only
way out of the container), the host runs the quick load check on the file in the run's work
folder, writes the screenshot into /work/shots/ and answers with what it saw.
"""

import asyncio
import itertools
from pathlib import Path
from typing import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

SHOT_PATH = "/_showcase/shot"

SHOT_SH = r"""#!/bin/sh
# shot.sh FILE: ask the host for a quick load check of FILE (in /work): a screenshot is saved
# into /work/shots/ and console errors are printed. Exit 0 when the page loads without errors.
f="${1:-game.html}"
base="${OPENAI_BASE_URL%/}"; base="${base%/v1}"
body=$(printf '{"file": "%s"}' "$f")
out=$(curl -sS --max-time 120 -X POST -H "Authorization: Bearer $OPENAI_API_KEY" \
      -H 'Content-Type: application/json' --data "$body" "$base/_showcase/shot") || {
  echo "shot.sh: the host did not answer ($out)"; exit 2; }
printf '%s' "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
if "error" in r:
    print("shot.sh:", r["error"].get("message", r["error"]) if isinstance(r["error"], dict) else r["error"]); sys.exit(2)
print("loads without errors:", "yes" if r["loads"] else "no")
print("window.ready:", "true after %.1f s" % r["ready_after_s"] if r["ready"] else "never set")
print("screenshot:", r.get("screenshot") or "none")
errs = r.get("errors") or []
print("console errors: %d" % len(errs))
for e in errs[:20]:
    print("  " + e)
sys.exit(0 if r["loads"] else 1)
'
"""

# (html bytes, screenshot path) -> the quick check's result as a JSON-able dict
LoadCheck = Callable[[bytes, Path], Awaitable[dict]]


def write_tools(tools_dir: Path) -> None:
    path = tools_dir / "shot.sh"
    path.write_text(SHOT_SH)
    path.chmod(0o755)


def shot_route(work_dir: Path, load_check: LoadCheck, timeout_s: float = 100.0) -> Route:
    """The gate route behind shot.sh. One check at a time: two browsers would halve each one's CPU."""
    counter = itertools.count(1)
    lock = asyncio.Lock()

    async def shot(request: Request) -> JSONResponse:
        try:
            name = str((await request.json()).get("file") or "game.html")
        except Exception:
            name = "game.html"
        root = work_dir.resolve()
        path = (root / name.removeprefix("/work/")).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            return JSONResponse({"error": {"message": f"no such file in /work: {name}"}}, status_code=404)
        shots = root / "shots"
        shots.mkdir(exist_ok=True)
        png = shots / f"shot-{next(counter):03d}.png"
        async with lock:
            try:
                # The browser gets a loop of its own in a worker thread: the gate's loop keeps
                # serving the model while a page loads, and Playwright never shares it.
                html = path.read_bytes()
                result = await asyncio.wait_for(
                    asyncio.to_thread(lambda: asyncio.run(load_check(html, png))), timeout_s
                )
            except asyncio.TimeoutError:
                return JSONResponse({"error": {"message": f"load check took over {timeout_s:.0f} s"}}, status_code=504)
        result = dict(result)
        result["screenshot"] = f"/work/shots/{png.name}" if png.exists() else None
        return JSONResponse(result)

    return Route(SHOT_PATH, shot, methods=["POST"])
