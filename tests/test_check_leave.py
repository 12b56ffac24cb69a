"""A page that leaves (navigation, reload, `location = ...`, closing itself, a crashed renderer) at
any phase of the check is scored with what was measured; the rest is "not measured" with the time
it left. Never exit 3: that is the machine's failure, not the page's. Real Chromium throughout.
"""

import asyncio
import json
import re
import subprocess
import sys
import time

import pytest

from showcase.browser.launch import launch_browser
from showcase.check.models import CheckReport
from showcase.check.rubric import load_rubric, load_script
from showcase.check.runner import check_page, offline_cdn
from showcase.check.session import BoundedPage, StopMeasuring

from checked import PAGES, item

TEMPLATE = (PAGES / "leave.html").read_text()
SHOWCASE = [sys.executable, "-m", "showcase.cli"]
RUNS = 2  # each variant this many times: the race between leaving and measuring differs per run

# name -> (LEAVE settings, the phases the leave may fall into on a busy or idle machine)
VARIANTS = {
    "while loading": ({"at": "parse", "how": "href"}, {"navigation", "ready"}),
    "waiting for ready": ({"at": "start", "ms": 800, "how": "reload", "ready_ms": -1}, {"ready", "navigation"}),
    "right after ready": ({"at": "ready", "ms": 50, "how": "blank"}, {"ready", "after ready", "tour window 1"}),
    "tour window 1": ({"at": "ready", "ms": 3000, "how": "href"}, {"after ready", "tour window 1"}),
    "tour window 2": ({"at": "ready", "ms": 9000, "how": "local"}, {"tour window 1", "tour window 2"}),
    "before the wheel": ({"at": "ready", "ms": 12500, "how": "blank"}, {"tour window 2", "controls"}),
    "wheel step": ({"at": "wheel", "ms": 0, "how": "reload"}, {"controls"}),
    "after the wheel": ({"at": "wheel", "ms": 1300, "how": "href"}, {"controls"}),
    "drag step": ({"at": "mousedown", "ms": 0, "how": "href"}, {"controls"}),
}
HOW_WORDS = {"href": "navigated away to https://example.com/elsewhere.html", "blank": "navigated away to about:blank",
             "reload": "reloaded itself", "local": "navigated away to https://game.local/other.html", "close": "closed itself"}
LEFT_AT = re.compile(r"at (\d+\.\d) s")


def leave_page(settings: dict) -> bytes:
    full = {"at": "ready", "ms": 0, "how": "href", "ready_ms": 0, **settings}
    return re.sub(r"/\*LEAVE\*/.*?/\*END\*/", json.dumps(full), TEMPLATE, flags=re.S).encode()


@pytest.fixture(scope="module")
def left_reports() -> dict[str, list[CheckReport]]:
    async def run():
        limit = asyncio.Semaphore(4)

        async def one(name: str, settings: dict) -> tuple[str, CheckReport]:
            async with limit:
                return name, await check_page(leave_page(settings), page_name=name)

        jobs = [one(name, s) for _ in range(RUNS) for name, (s, _) in VARIANTS.items()]
        return await asyncio.gather(*jobs)

    out: dict[str, list[CheckReport]] = {}
    for name, report in asyncio.run(run()):
        out.setdefault(name, []).append(report)
    return out


@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_page_that_leaves_is_scored_with_what_was_measured(left_reports, name):
    settings, phases = VARIANTS[name]
    for report in left_reports[name]:
        assert report.left and HOW_WORDS[settings["how"]] in report.left, report.left
        assert report.stopped_phase in phases, (report.stopped_phase, report.phases)
        at = float(LEFT_AT.search(report.left).group(1))
        assert 0 <= at <= report.seconds
        # Everything after the leave is "not measured", naming where the page went and when.
        lost = [i for i in report.items if i.reason.startswith("not measured")]
        assert lost, [i.reason for i in report.items]
        for i in lost:
            assert i.points == 0 and f"the page {report.left}" in i.reason
        assert item(report, "10").points == 0
        # What was measured before counts.
        if report.stopped_phase == "tour window 2":
            assert item(report, "7").passed and item(report, "4").passed
        if name in ("wheel step", "after the wheel", "drag step"):
            assert item(report, "7").passed and item(report, "8").passed and item(report, "6a").passed
        if name == "while loading":
            assert not item(report, "1").passed and "before its load event" in item(report, "1").reason


def test_a_crashed_renderer_is_the_page_leaving_not_the_machine_failing():
    """The renderer of our page is crashed through CDP mid-check: the next call stops measuring."""
    rubric = load_rubric()

    async def run():
        async with launch_browser(rubric.renderer) as browser:
            bp = await BoundedPage.open(browser, (PAGES / "good.html").read_bytes(), offline_cdn(None), rubric.viewport,
                                        [load_script("ready.js"), load_script("probe.js")], time.monotonic() + 60, 10)
            assert await bp.goto(30) is None
            crash = asyncio.create_task(bp.cdp.send("Page.crash"))  # never answers: the page is gone
            with pytest.raises(StopMeasuring, match="lost its renderer"):
                for _ in range(50):
                    await bp.evaluate("1")
                    await asyncio.sleep(0.1)
            crash.cancel()
            await bp.close()
            return bp

    bp = asyncio.run(run())
    assert bp.crashed and "crashed" in bp.left


def test_cli_several_pages_one_leaving_all_scored_exit_0(tmp_path):
    leaving = tmp_path / "leaving.html"
    leaving.write_bytes(leave_page({"at": "ready", "ms": 3000, "how": "href"}))
    pages = [leaving, PAGES / "tiny_world.html"]
    out = subprocess.run([*SHOWCASE, "check", *map(str, pages), "--out", str(tmp_path / "out"), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    left, tiny = (CheckReport.model_validate_json((tmp_path / "out" / p.stem / "check.json").read_text()) for p in pages)
    assert "navigated away" in left.left and left.total < tiny.total + 3
    assert tiny.left is None and item(tiny, "10").reason and not item(tiny, "10").reason.startswith("not measured")


def test_a_fault_in_our_own_code_fails_that_page_alone_named_as_ours(tmp_path, monkeypatch, capsys):
    """Our scorer is made to fail for one page only: the other page still gets its report, exit 1, not 3."""
    from showcase import cli as showcase_cli
    from showcase.check import scoring

    real = scoring._Scorer.world

    def broken(self):
        if self.m.text and "garden" in self.m.text:
            raise KeyError("triangles")
        return real(self)

    monkeypatch.setattr(scoring._Scorer, "world", broken)
    pages = [PAGES / "good.html", PAGES / "tiny_world.html"]
    monkeypatch.setattr(sys, "argv", ["showcase", "check", *map(str, pages), "--out", str(tmp_path), "--json"])
    with pytest.raises(SystemExit) as exit_:
        showcase_cli.main()
    err = capsys.readouterr().err
    assert exit_.value.code == 1, err
    assert (tmp_path / "tiny_world" / "check.json").exists() and not (tmp_path / "good" / "check.json").exists()
    assert "bug in showcase" in err and "KeyError" in err and "good.html" in err
