"""Look at a demo page the way the check will: real Chromium, offline CDN, software GL.

A rough self-check for authors of demo pages, not the published check (src/showcase/check is):
errors, time to ready, parts and triangles in window.scene, rAF frame rate over 5 s, camera
movement without input, and a screenshot to look at.

    .venv/bin/python tasks/voxel/demo/inspect_page.py tasks/voxel/demo/pages/v4.html out.png [renderer]
"""

import asyncio
import json
import sys
import time
from pathlib import Path

from showcase.browser.cdn import OfflineCdn
from showcase.browser.launch import launch_browser
from showcase.browser.page import PAGE_URL, open_page
from showcase.task import load_task

# Hooks the renderer's per-frame call to learn the camera, and counts the world's parts.
PROBE = """() => {
  const s = window.scene; if (!s) return null;
  let parts = 0, tris = 0, moving = 0;
  s.traverse(o => {
    if (!o.isMesh) return;
    const n = o.isInstancedMesh ? o.count : 1; parts += n;
    const g = o.geometry; const t = (g.index ? g.index.count : g.attributes.position.count) / 3;
    tris += t * n;
  });
  return {parts, tris: Math.round(tris)};
}"""
CAMERA = """() => { const c = window.__cam; return c ? c.matrixWorld.elements.slice() : null; }"""
HOOK = """() => { const s = window.scene; const prev = s.onBeforeRender;
  s.onBeforeRender = function (r, sc, cam) { window.__cam = cam; window.__frames = (window.__frames||0) + 1; return prev && prev.apply(this, arguments); }; }"""


def _pos(mat):
    return mat[12:15]


def _dist(a, b):
    return sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5


async def controls_effect(page) -> dict:
    """Camera movement in 1.5 s without input, then with a wheel, then with a drag (fresh baselines)."""
    async def cam():
        return _pos(await asyncio.wait_for(page.evaluate(CAMERA), 20))

    out = {}
    for name in ("wheel", "drag"):
        a = await cam()
        await asyncio.sleep(1.5)
        b = await cam()
        out[f"{name}_baseline"] = round(_dist(a, b), 2)
        await asyncio.wait_for(page.mouse.move(640, 360), 20)
        if name == "wheel":
            await asyncio.wait_for(page.mouse.wheel(0, -600), 20)
        else:
            await asyncio.wait_for(page.mouse.down(), 20)
            for i in range(10):
                await asyncio.wait_for(page.mouse.move(640 + 30 * (i + 1), 360 + 5 * (i + 1)), 20)
            await asyncio.wait_for(page.mouse.up(), 20)
        await asyncio.sleep(1.5)
        out[name] = round(_dist(b, await cam()), 2)
    return out


async def inspect(path: Path, png: Path, renderer: str) -> dict:
    cdn = OfflineCdn(load_task("voxel").npm)
    async with launch_browser(renderer) as browser:
        s = await open_page(browser, path.read_bytes(), cdn)
        t0 = time.monotonic()
        await asyncio.wait_for(s.page.goto(PAGE_URL, timeout=30000), 40)
        ready = None
        try:
            await s.page.wait_for_function("window.ready === true", timeout=30000)
            ready = round(time.monotonic() - t0, 2)
        except Exception:
            pass
        out = {"ready_s": ready, "errors": s.events.all_errors()}
        if ready is not None:
            await asyncio.wait_for(s.page.evaluate(HOOK), 20)
            await asyncio.sleep(2)  # warm up: frames are slow right after ready
            out["world"] = await asyncio.wait_for(s.page.evaluate(PROBE), 20)
            f0 = await asyncio.wait_for(s.page.evaluate("window.__frames"), 20)
            c0 = await asyncio.wait_for(s.page.evaluate(CAMERA), 20)
            await asyncio.sleep(5)
            f1 = await asyncio.wait_for(s.page.evaluate("window.__frames"), 20)
            c1 = await asyncio.wait_for(s.page.evaluate(CAMERA), 20)
            out["fps"] = round((f1 - f0) / 5, 1)
            out["camera_moved"] = round(max(abs(a - b) for a, b in zip(c0, c1)), 3) if c0 and c1 else None
            await asyncio.wait_for(s.page.screenshot(path=str(png)), 60)
            out["caption"] = await asyncio.wait_for(s.page.evaluate("document.body.innerText"), 20)
            out["controls"] = await controls_effect(s.page)
        out["errors"] = s.events.all_errors()
        return out


if __name__ == "__main__":
    page, png = Path(sys.argv[1]), Path(sys.argv[2])
    print(json.dumps(asyncio.run(inspect(page, png, sys.argv[3] if len(sys.argv) > 3 else "swiftshader")), indent=1))
