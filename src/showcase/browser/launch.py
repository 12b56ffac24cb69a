"""Launch Debian's Chromium through Playwright, with the renderer pinned by name, always sealed.

Every browser that opens a page runs through showcase.browser.seal: as an unprivileged user, with
Chromium's own sandbox on, in a network namespace with loopback only, WebRTC's UDP off, and an
environment without any of ours. There is no unsealed way to launch it.
"""

import asyncio
import os
import subprocess
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from playwright.async_api import Browser, async_playwright

from showcase.browser import seal
from showcase.errors import InfraError

CHROMIUM = os.environ.get("SHOWCASE_CHROMIUM", "/usr/bin/chromium")

# Never let Chromium phone home: on a sealed machine those lookups fail noisily and slowly.
# Nor build browser UI nobody sees: headless Chromium loads the omnibox popup's WebUI (a renderer
# of its own) for every new page, about a second of CPU each, measured on a blank page; a run's
# load checks open a page per version and the check's page shared the cores with it.
QUIET_ARGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # A sandboxed frame of the page stays in the page's process, where the probe sees its errors:
    # in a process of its own, its cancelled errors reached no record (IsolateSandboxedIframes).
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup,IsolateSandboxedIframes",
    # A page sees the browser a person has: `navigator.webdriver` is false (a page drew its world
    # only where it was true, that is, only for the check). The user agent is set per page (page.py).
    "--disable-blink-features=AutomationControlled",
]

# "swiftshader" is Chromium's default software GL, the published method's "software GL"; the
# frame-rate item is pinned to it. "llvmpipe" (Mesa through ANGLE/EGL) is 2-4x faster and serves
# work that does not score frame rate (clip, quick checks).
RENDERERS: dict[str, list[str]] = {
    "swiftshader": ["--use-angle=swiftshader"],
    "llvmpipe": ["--use-angle=gl-egl", "--ignore-gpu-blocklist"],
}

LAUNCH_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 15.0


def chromium_version() -> str:
    try:
        out = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, timeout=20)
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise InfraError(f"Chromium not usable at {CHROMIUM}: {exc}; install it with `apt-get install chromium`") from exc


@asynccontextmanager
async def launch_browser(renderer: str = "swiftshader", extra_args: list[str] | None = None) -> AsyncIterator[Browser]:
    if renderer not in RENDERERS:
        raise InfraError(f"unknown renderer {renderer!r}; known: {', '.join(RENDERERS)}")
    if not Path(CHROMIUM).exists():
        raise InfraError(f"Chromium not found at {CHROMIUM}; install it with `apt-get install chromium` (scripts/setup.sh does)")
    with seal.private_folder() as folder:
        sealed = seal.prepare(CHROMIUM, Path(folder))
        async with async_playwright() as pw:
            try:
                browser = await asyncio.wait_for(
                    pw.chromium.launch(
                        executable_path=str(sealed.launcher),
                        args=QUIET_ARGS + seal.SEAL_ARGS + RENDERERS[renderer] + list(extra_args or []),
                        chromium_sandbox=True,
                        env=sealed.env,
                        timeout=LAUNCH_TIMEOUT_S * 1000,
                    ),
                    LAUNCH_TIMEOUT_S + 5,
                )
            except Exception as exc:  # Playwright raises its own Error types; all mean "no browser".
                text = str(exc)
                why = seal.seal_error(text) or (text.splitlines()[0] if text else type(exc).__name__)
                raise InfraError(f"Chromium did not start sealed ({sealed.mode}): {why}") from exc
            try:
                yield browser
            finally:
                # Closing a browser whose page hangs has always worked, but never wait forever: not
                # even when this task is cancelled (asyncio.wait_for then waits for the close's own
                # cancellation, which Playwright need not honour).
                closing = asyncio.ensure_future(browser.close())
                try:
                    await asyncio.wait({closing}, timeout=CLOSE_TIMEOUT_S)
                finally:
                    if not closing.done() or closing.cancelled() or closing.exception() is not None:
                        closing.cancel()
                        proc = getattr(getattr(browser, "_impl_obj", None), "_browser_process", None)
                        if proc is not None:
                            proc.kill()


async def seal_check() -> str:
    """Launch a sealed browser, open a page, and say what /proc shows of it (for `showcase doctor`).

    Raises InfraError when the browser does not start sealed or /proc shows any part unsealed.
    """
    marker = f"--showcase-seal-check={uuid.uuid4().hex}"
    async with launch_browser("swiftshader", [marker]) as browser:
        page = await browser.new_page()
        await page.goto("about:blank")
        webgl2 = await page.evaluate("!!document.createElement('canvas').getContext('webgl2')")
        pid = seal.browser_pid(marker)
        if pid is None:
            raise InfraError("the sealed browser started but its process was not found in /proc")
        facts = seal.seal_facts(pid)
    line = f"{facts.line()}; WebGL 2 {'on' if webgl2 else 'OFF'}"
    if not facts.sealed:
        raise InfraError(f"the browser is not sealed: {line}")
    return line
