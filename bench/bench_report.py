"""How the report scales with a long run: time to write and to open report.html for a run with
many versions and requests, as a ratio to a small run measured in the same process.

    .venv/bin/python bench/bench_report.py [--versions 300] [--requests 3000]
"""

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from runfolder import make_clip, make_run  # noqa: E402

from showcase.browser.launch import launch_browser  # noqa: E402
from showcase.report import write_run_report  # noqa: E402


def timed_write(run: Path, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        write_run_report(run)
        best = min(best, time.perf_counter() - t)
    return best


async def timed_open(paths: list[Path]) -> list[float]:
    out = []
    async with launch_browser() as browser:
        for path in paths:
            page = await browser.new_page(viewport={"width": 1280, "height": 720})
            t = time.perf_counter()
            await asyncio.wait_for(page.goto(path.as_uri(), wait_until="load"), 60)
            out.append(time.perf_counter() - t)
            await page.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", type=int, default=300)
    ap.add_argument("--requests", type=int, default=3000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        root.chmod(0o755)  # the sealed browser opens the report as its own user
        clip = make_clip(root / "clip.mp4")
        small = make_run(root, "small", clip_source=clip, n_versions=5, requests=12, agent_shots=0)
        big = make_run(root, "big", clip_source=clip, n_versions=args.versions, requests=args.requests, agent_shots=0)
        ws, wb = timed_write(small), timed_write(big)
        size_s, size_b = (small / "report.html").stat().st_size, (big / "report.html").stat().st_size
        # the first page a fresh browser opens pays its warm-up: open the small one twice
        _, os_, ob = asyncio.run(timed_open([small / "report.html", small / "report.html", big / "report.html"]))
        print(f"write: small {ws * 1000:.0f} ms, big ({args.versions} versions, {args.requests} requests) {wb * 1000:.0f} ms, ratio {wb / ws:.1f}")
        print(f"size:  small {size_s / 1024:.0f} KiB, big {size_b / 1024:.0f} KiB, ratio {size_b / size_s:.1f}")
        print(f"open:  small {os_ * 1000:.0f} ms, big {ob * 1000:.0f} ms, ratio {ob / os_:.1f}")


if __name__ == "__main__":
    main()
