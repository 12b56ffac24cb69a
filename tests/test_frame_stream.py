"""The check's pictures (browser/bounded.py next_frame_png), in real Chromium: a picture is never
older than its request, and a page that draws nothing new still gets one."""

import asyncio

import numpy as np

from showcase.browser.bounded import next_frame_png
from showcase.browser.launch import launch_browser
from showcase.check.pixels import to_array

# The page clears a WebGL canvas to a colour of its own each frame (red = frame count), slowly:
# each frame blocks its main thread 300 ms, so a stale picture would be one or more counts behind.
COUNTING = """<!doctype html><body style="margin:0"><canvas width="320" height="240"></canvas><script>
const gl = document.querySelector('canvas').getContext('webgl2');
window.n = 0;
function f() { const s = performance.now(); while (performance.now() - s < 300) {}
  window.n++; gl.clearColor((window.n % 256) / 255, 40 / 255, 90 / 255, 1); gl.clear(gl.COLOR_BUFFER_BIT);
  requestAnimationFrame(f); }
requestAnimationFrame(f);
</script>"""
STILL = """<!doctype html><body style="margin:0;background:rgb(10,200,30)">"""


def _red(png: bytes) -> int:
    return int(np.median(to_array(png)[..., 0]))


async def _counting() -> list[tuple[int, int]]:
    async with launch_browser() as browser:
        page = await browser.new_page(viewport={"width": 320, "height": 240})
        await page.set_content(COUNTING)
        cdp = await page.context.new_cdp_session(page)
        out = []
        for _ in range(4):
            await asyncio.sleep(0.5)
            # answered in a frame's callbacks, after the page's own (registered a frame earlier): frame n
            # is being drawn now and not yet committed, frame n - 1 is the last the page handed on
            n = await page.evaluate("new Promise((r) => requestAnimationFrame(() => r(window.n)))")
            png = await asyncio.wait_for(next_frame_png(cdp), 20)
            out.append((n, _red(png)))
        return out


async def _still() -> list[tuple[int, int, int]]:
    async with launch_browser() as browser:
        page = await browser.new_page(viewport={"width": 320, "height": 240})
        await page.set_content(STILL)
        cdp = await page.context.new_cdp_session(page)
        await page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")  # painted
        out = []
        for _ in range(3):
            png = await asyncio.wait_for(next_frame_png(cdp), 20)  # back to back: the last stop is awaited first
            out.append(tuple(int(v) for v in np.median(to_array(png).reshape(-1, 3), axis=0)))
        return out


def test_a_picture_shows_the_page_as_it_was_at_the_request_or_later():
    for n, red in asyncio.run(_counting()):
        # the colour the page had handed on when asked, or a later one; a picture kept from the last
        # request would be two or more counts behind (0.5 s and a call apart, frames 300 ms apart)
        assert n - 1 <= red <= n + 4, (n, red)


def test_a_page_that_draws_nothing_new_still_gets_its_picture_back_to_back():
    shots = asyncio.run(_still())
    assert shots == [(10, 200, 30)] * 3, shots
