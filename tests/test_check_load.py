"""The same pages give the same verdicts at idle and with both cores kept busy by a CPU burner
this test starts; only the frame rate may differ, and only where the measured fps lies within 15 %
of a threshold. check.json records the foreign CPU load. The demo's own page keeps its controls
point in every run. Real Chromium throughout; runs are frame-bound, never timed."""

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from showcase.check.models import CheckReport
from showcase.check.rubric import load_rubric
from showcase.check.runner import check_page

REPO = Path(__file__).resolve().parents[1]
PAGES = {
    "good": REPO / "tests" / "pages" / "good.html",
    "demo v4": REPO / "tasks" / "voxel" / "demo" / "pages" / "v4.html",
}
RUNS = 3
BURN = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end:\n    pass\n"


def checks(names: list[str]) -> list[CheckReport]:
    async def run():
        limit = asyncio.Semaphore(2)

        async def one(name: str) -> CheckReport:
            async with limit:
                return await check_page(PAGES[name].read_bytes(), page_name=name)

        return await asyncio.gather(*(one(n) for n in names))

    return asyncio.run(run())


@pytest.fixture(scope="module")
def idle_and_busy() -> dict[str, dict[str, list[CheckReport]]]:
    names = [n for _ in range(RUNS) for n in PAGES]
    out = {"idle": {}, "busy": {}}
    for name, r in zip(names, checks(names)):
        out["idle"].setdefault(name, []).append(r)
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(2)]
    try:
        for name, r in zip(names, checks(names)):
            out["busy"].setdefault(name, []).append(r)
    finally:
        for b in burners:
            b.kill()
            b.wait(10)
    return out


def verdicts(report: CheckReport) -> dict[str, bool]:
    return {i.id: i.passed for i in report.items if i.id != "5"}


def fps_verdict_may_differ(reports: list[CheckReport]) -> bool:
    spec = load_rubric().items["5"]
    fps = [next(i for i in r.items if i.id == "5").figures.get("fps") or 0.0 for r in reports]
    return any(abs(f - t) <= 0.15 * t for f in fps for t in (spec["half_fps"], spec["full_fps"]))


@pytest.mark.parametrize("name", list(PAGES))
def test_same_verdicts_at_idle_and_under_a_cpu_burner(idle_and_busy, name):
    runs = idle_and_busy["idle"][name] + idle_and_busy["busy"][name]
    first = verdicts(runs[0])
    for r in runs[1:]:
        assert verdicts(r) == first, (r.summary, runs[0].summary)
    if not fps_verdict_may_differ(runs):
        assert len({next(i for i in r.items if i.id == "5").points for r in runs}) == 1
    # the burner shows in the record: two spinners beside two checks on two cores get at least a
    # quarter of the machine (0.69-0.9 cores measured here), whatever else it was doing at idle
    busy = min(r.foreign_cpu_cores or 0.0 for r in idle_and_busy["busy"][name])
    assert busy >= 0.5, busy


def test_the_demo_page_earns_its_controls_point_in_every_run(idle_and_busy):
    for state in ("idle", "busy"):
        for r in idle_and_busy[state]["demo v4"]:
            ten = next(i for i in r.items if i.id == "10")
            assert ten.passed, (state, ten.reason, ten.figures)
