"""`shot.sh` inside the sandbox, and the host endpoint it asks through the relay and the gate.

The agent calls `shot.sh FILE` (the task's page when no FILE is named); the script posts to /_showcase/shot on the gate (the only
way out of the container), the host runs the quick load check on the file in the run's work
folder, writes the screenshot into /work/shots/ and answers with what it saw.

The agent decides how often it asks, so the endpoint bounds what it holds: one check runs and at
most SHOTS_WAITING requests wait for their turn; any more are answered at once with 429 "busy,
try again" (shot.sh prints it and exits 3). A request takes its place only once its whole body
has arrived, within BODY_S: a caller that sends part of a request and waits holds no place. A
request whose caller has gone (shot.sh killed, a command timeout) is dropped before its check
starts, so the run's browser takes no screenshot for nobody. `ShotFigures` counts what happened
(run-info.json's shot_requests): every request asked is answered, busy or dropped.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import tempfile
from pathlib import Path
from typing import Awaitable, Callable

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from showcase.host.untrusted import DEFAULT_PAGE_CAP, Refused, read_regular, write_new
from showcase.runfolder.artefacts import SHOTS_WAITING, ShotFigures
from showcase.task import DEFAULT_OUTPUT_FILE

SHOT_PATH = "/_showcase/shot"
LEFT_POLL_S = 0.5  # how often a waiting request looks whether its caller is still there
BUSY_EXIT = 3  # shot.sh's exit code for "busy, try again"
BODY_S = 10.0  # shot.sh sends its few bytes at once: a body slower than this is not waited for

SHOT_SH = r"""#!/bin/sh
# shot.sh FILE: ask the host for a quick load check of FILE (in /work): a screenshot is saved
# into /work/shots/ and console errors are printed. Exit 0 when the page loads without errors,
# 1 when it does not, 2 when it was not checked, 3 when the host is busy with other shot.sh
# checks ("busy, try again": one runs and a few wait at most; ask again in a few seconds).
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
    e = r["error"] if isinstance(r["error"], dict) else {"message": r["error"]}
    print("shot.sh:", e.get("message", e)); sys.exit(%BUSY_EXIT% if e.get("type") == "busy" else 2)
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

BUSY_MESSAGE = (f"busy, try again: a shot.sh check is running and {SHOTS_WAITING} more are waiting; "
                "ask again in a few seconds")
CALLER_GONE = 499  # the status logged for a dropped request (nginx's 'client closed request'): nobody reads it


def _encodable(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, as a JSON \\udXXX escape gives
        return False
    return True


def write_tools(tools_dir: Path, page_name: str = DEFAULT_OUTPUT_FILE) -> None:
    """shot.sh, checking the task's page (page_name) when called without a file."""
    path = tools_dir / "shot.sh"
    path.write_text(SHOT_SH.replace("%PAGE%", page_name.replace("'", "").replace('"', "").replace("$", ""))
                    .replace("%BUSY_EXIT%", str(BUSY_EXIT)))
    path.chmod(0o755)


def shot_route(work_dir: Path, load_check: LoadCheck, timeout_s: float = 100.0,
               page_cap: int = DEFAULT_PAGE_CAP, scratch_dir: Path | None = None,
               on_refused: Callable[[str, str], None] | None = None,
               page_name: str = DEFAULT_OUTPUT_FILE, figures: ShotFigures | None = None) -> Route:
    """The gate route behind shot.sh. One check at a time, at most SHOTS_WAITING more waiting (the
    rest are busy at once); a caller that leaves while waiting is dropped before its check. The
    load_check given decides where the check runs (the run's browser, in a slot of its own).

    The file is read only once the lock is held, through the folder handle (no link followed,
    regular files only, at most page_cap bytes): what is checked is what was read, never a path
    checked earlier and swapped since. The screenshot is taken into scratch_dir (the host's) and
    then created in work/shots/ through a folder handle, so a shots/ link leads nowhere.
    figures: counted here as requests come and go (a fresh ShotFigures when not given).
    """
    counter = itertools.count(1)
    lock = asyncio.Lock()
    figures = figures if figures is not None else ShotFigures()
    in_line = 0  # requests being checked or waiting for their turn

    def refused(message: str, name: str, reason: str, status: int = 403) -> JSONResponse:
        if on_refused is not None:
            try:
                on_refused(name, reason)
            except Exception:
                pass
        return JSONResponse({"error": {"message": message}}, status_code=status)

    async def turn(request: Request) -> bool:
        """Take the lock, in arrival order; False, without it, when the caller leaves meanwhile."""
        acquiring = asyncio.ensure_future(lock.acquire())
        got = False
        try:
            while True:
                await asyncio.wait({acquiring}, timeout=LEFT_POLL_S)
                if acquiring.done():
                    got = True
                    return True
                if await request.is_disconnected():
                    return False
        finally:
            if not got and not acquiring.cancel() and not acquiring.cancelled():
                lock.release()  # handed over just as the caller left: pass it on

    async def read_body(request: Request) -> bytes | JSONResponse:
        """The request's body, or the answer saying why it is not read (too large, too slow).
        ClientDisconnect when the caller leaves meanwhile."""
        body = bytearray()
        try:
            async with asyncio.timeout(BODY_S):
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > MAX_REQUEST_BYTES:
                        return JSONResponse({"error": {"message": f"request over {MAX_REQUEST_BYTES} bytes: "
                                                                  "send {\"file\": NAME}"}}, status_code=413)
        except TimeoutError:
            return JSONResponse({"error": {"message": f"the request's body did not arrive within {BODY_S:g} s"}},
                                status_code=408, headers={"connection": "close"})
        return bytes(body)

    async def check(request: Request, body: bytes) -> JSONResponse | None:
        """The answer to one request that got a place in line; None when its caller left first."""
        try:
            name = str(json.loads(body).get("file") or page_name)
        except Exception:
            name = page_name
        if "\x00" in name or not _encodable(name):
            return JSONResponse({"error": {"message": "not checked: the file name holds a NUL or a lone surrogate, "
                                                      "which no file name in /work can"}}, status_code=400)
        rel = name.removeprefix("/work/").lstrip("/")
        if not await turn(request):
            return None
        try:
            if await request.is_disconnected():
                return None
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
        finally:
            lock.release()

    def dropped() -> JSONResponse:
        figures.dropped += 1
        return JSONResponse({"error": {"message": "the caller left before its check started: not checked"}},
                            status_code=CALLER_GONE)

    async def shot(request: Request) -> JSONResponse:
        nonlocal in_line
        figures.asked += 1
        try:
            body = await read_body(request)
        except ClientDisconnect:
            return dropped()
        if isinstance(body, JSONResponse):
            figures.answered += 1
            return body
        if in_line > SHOTS_WAITING:  # one checked and SHOTS_WAITING waiting already
            figures.busy += 1
            return JSONResponse({"error": {"message": BUSY_MESSAGE, "type": "busy"}}, status_code=429,
                                headers={"Retry-After": "5"})
        in_line += 1
        try:
            answer = await check(request, body)
        except Exception as exc:  # a fault of the host's: answered and counted, never a request lost from the figures
            answer = JSONResponse({"error": {"message": f"the host could not check the page: {exc.__class__.__name__}"}},
                                  status_code=500)
        finally:
            in_line -= 1
        if answer is None:
            return dropped()
        figures.answered += 1
        return answer

    return Route(SHOT_PATH, shot, methods=["POST"])
