"""`shot.sh` inside the sandbox, and the host endpoint it asks through the relay and the gate.

The agent calls `shot.sh FILE` (the task's page when no FILE is named); the script posts to /_showcase/shot on the gate (the only
way out of the container), the host runs the quick load check on the file in the run's work
folder, writes the screenshot into /work/shots/ and answers with what it saw.
"""

import asyncio
import itertools
import json
import tempfile
from pathlib import Path
from typing import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from showcase.run.untrusted import DEFAULT_PAGE_CAP, Refused, read_regular, write_new
from showcase.task import DEFAULT_OUTPUT_FILE

SHOT_PATH = "/_showcase/shot"

SHOT_SH = r"""#!/bin/sh
# shot.sh FILE: ask the host for a quick load check of FILE (in /work): a screenshot is saved
# into /work/shots/ and console errors are printed. Exit 0 when the page loads without errors.
f="${1:-%PAGE%}"
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
print("window.ready:", "true after %.1f s" % r["ready_after_s"] if r["ready"] else "not set before the check stopped" if r.get("errors") else "never set")
print("screenshot:", r.get("screenshot") or r.get("screenshot_refused") or "none")
errs = r.get("errors") or []
print("console errors: %d" % len(errs))
for e in errs[:20]:
    print("  " + e)
sys.exit(0 if r["loads"] else 1)
'
"""

# shot.sh sends {"file": NAME}: anything longer is not shot.sh, and the host reads no more of it.
MAX_REQUEST_BYTES = 64 * 1024

# (html bytes, screenshot path) -> the quick check's result as a JSON-able dict
LoadCheck = Callable[[bytes, Path], Awaitable[dict]]


def write_tools(tools_dir: Path, page_name: str = DEFAULT_OUTPUT_FILE) -> None:
    """shot.sh, checking the task's page (page_name) when called without a file."""
    path = tools_dir / "shot.sh"
    path.write_text(SHOT_SH.replace("%PAGE%", page_name.replace("'", "").replace('"', "").replace("$", "")))
    path.chmod(0o755)


def shot_route(work_dir: Path, load_check: LoadCheck, timeout_s: float = 100.0,
               page_cap: int = DEFAULT_PAGE_CAP, scratch_dir: Path | None = None,
               on_refused: Callable[[str, str], None] | None = None,
               page_name: str = DEFAULT_OUTPUT_FILE) -> Route:
    """The gate route behind shot.sh. One check at a time, in the run's browser ahead of any
    version still waiting for its check (the load_check given decides where it runs).

    The file is read only once the lock is held, through the folder handle (no link followed,
    regular files only, at most page_cap bytes): what is checked is what was read, never a path
    checked earlier and swapped since. The screenshot is taken into scratch_dir (the host's) and
    then created in work/shots/ through a folder handle, so a shots/ link leads nowhere.
    """
    counter = itertools.count(1)
    lock = asyncio.Lock()

    def refused(message: str, name: str, reason: str, status: int = 403) -> JSONResponse:
        if on_refused is not None:
            try:
                on_refused(name, reason)
            except Exception:
                pass
        return JSONResponse({"error": {"message": message}}, status_code=status)

    async def shot(request: Request) -> JSONResponse:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_REQUEST_BYTES:
                return JSONResponse({"error": {"message": f"request over {MAX_REQUEST_BYTES} bytes: send {{\"file\": NAME}}"}},
                                    status_code=413)
        try:
            name = str(json.loads(body).get("file") or page_name)
        except Exception:
            name = page_name
        rel = name.removeprefix("/work/").lstrip("/")
        async with lock:
            try:
                html = read_regular(work_dir, rel, page_cap)
            except FileNotFoundError:
                return JSONResponse({"error": {"message": f"no such file in /work: {name}"}}, status_code=404)
            except Refused as exc:
                return refused(f"not checked: {exc}", exc.name, exc.reason)
            except OSError as exc:
                return refused(f"not checked: {name}: {exc.strerror or exc}", rel, "unreadable")
            png_name = f"shot-{next(counter):03d}.png"
            with tempfile.TemporaryDirectory(prefix="showcase-shot-", dir=scratch_dir) as scratch:
                png = Path(scratch) / png_name
                try:
                    # The browser gets a loop of its own in a worker thread: the gate's loop keeps
                    # serving the model while a page loads, and Playwright never shares it.
                    result = await asyncio.wait_for(
                        asyncio.to_thread(lambda: asyncio.run(load_check(html, png))), timeout_s
                    )
                except asyncio.TimeoutError:
                    return JSONResponse({"error": {"message": f"load check took over {timeout_s:.0f} s"}}, status_code=504)
                except Exception as exc:  # the host's browser is full or broken: ours to say, never the page's
                    why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
                    return JSONResponse({"error": {"message": f"the host could not check the page now: {why}"}},
                                        status_code=503)
                result = dict(result)
                result["screenshot"] = None
                if png.is_file():
                    try:
                        write_new(work_dir, "shots", png_name, png.read_bytes())
                        result["screenshot"] = f"/work/shots/{png_name}"
                    except Refused as exc:
                        refused("", exc.name, exc.reason)
                        result["screenshot_refused"] = str(exc)
        return JSONResponse(result)

    return Route(SHOT_PATH, shot, methods=["POST"])
