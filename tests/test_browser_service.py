"""The run's browser service: a job still under way when the service closes gets an answer.

An agent can end while its shot.sh is being answered; the run then closes its browser. The
shot's caller waits on that job: it must get an error at once, or the run's process never exits.
A broken page is judged at its first error; a weighted service holds the check's CPU group.
A burst of shot.sh calls is bounded, callers that left are dropped, and version checks keep
their share of the browser meanwhile.
"""

import asyncio
import os
import signal
import subprocess
import time

import pytest
from starlette.applications import Starlette

from showcase.browser.service import ORDINARY, URGENT, BrowserService
from showcase.check.quick import QUICK_RENDERER, load_check
from showcase.errors import InfraError
from showcase.gate.server import AppServer
from showcase.run.orchestrate import _quick_check_dict
from showcase.run.shot import BUSY_EXIT, shot_route, write_tools
from showcase.runfolder.artefacts import SHOTS_WAITING, ShotFigures

pytestmark = pytest.mark.browser


def test_a_job_under_way_at_close_fails_instead_of_waiting_forever():
    service = BrowserService(parallel=1).start(wait=True)

    async def never_ends(browser):
        await asyncio.sleep(3600)

    fut = service.submit(never_ends)
    deadline = time.monotonic() + 10
    while not fut.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fut.running()
    service.close()
    with pytest.raises(InfraError, match="closed"):
        fut.result(timeout=15)


# Throws as it loads; were the check to wait for ready, that would come 60 s later.
BROKEN = b"<!doctype html><title>broken</title><script>setTimeout(() => { window.ready = true }, 60000); throw new Error('broken at load')</script>"
# Fails to load: its one script is at an address the sealed browser never reaches.
UNREACHABLE = b"<!doctype html><title>gone</title><script src='https://example.invalid/x.js'></script><script>setTimeout(() => { window.ready = true }, 60000)</script>"


def test_a_page_that_fails_is_judged_at_its_first_error_not_after_the_ready_timeout(tmp_path):
    with BrowserService(QUICK_RENDERER).start(wait=True) as service:
        results = [service.run(lambda browser, html=html, i=i: load_check(
            html, browser=browser, screenshot_path=tmp_path / f"{i}.png", ready_timeout_s=90))
            for i, html in enumerate((BROKEN, UNREACHABLE))]
    thrown, unreachable = results
    assert not thrown.loads and not thrown.ready and any("broken at load" in e for e in thrown.errors)
    assert not unreachable.loads and not unreachable.ready and any("example.invalid" in e for e in unreachable.errors)
    for i, result in enumerate(results):
        assert result.seconds < 45, result  # ready would have come at 60 s: the check did not wait for it
        assert result.screenshot == str(tmp_path / f"{i}.png")  # the page as it was when judged
        assert (tmp_path / f"{i}.png").read_bytes()[:4] == b"\x89PNG"


def test_a_weighted_service_and_its_browser_hold_the_check_group_until_close():
    """A run's load checks weigh what the final check weighs: beside another run's final check in
    the group, a burst of load checks outside it got almost no CPU while its bounds ran."""
    from showcase.browser.seal import process_tree
    from showcase.host import cpu_share
    from showcase.check.rubric import load_rubric

    group = "/" + cpu_share.GROUP
    home = cpu_share.group_of(os.getpid())
    assert home != group
    with BrowserService(QUICK_RENDERER, cpu_weight=load_rubric().cpu_weight_factor).start(wait=True) as service:
        assert service.cpu_share and group in service.cpu_share, service.cpu_share
        browser = service.browser_pid()
        assert browser is not None
        assert {cpu_share.group_of(p) for p in process_tree(browser)} <= {group, None}
        assert cpu_share.group_of(os.getpid()) == group
        # A job runs as before.
        assert service.run(lambda b: load_check(b"<!doctype html><script>window.ready = true</script><p>hi</p>", browser=b)).loads
    assert cpu_share.group_of(os.getpid()) == home
    # Without a weight the service leaves the process where it is.
    with BrowserService(QUICK_RENDERER).start(wait=True) as service:
        assert service.cpu_share is None and cpu_share.group_of(os.getpid()) == home


# A shot of this page takes 7 s or more (ready after 4 s, then the check's 3 s settle).
SLOW = b"<!doctype html><title>slow</title><p>slow</p><script>setTimeout(() => { window.ready = true }, 4000)</script>"
QUICK = b"<!doctype html><title>quick</title><p>quick</p><script>window.ready = true</script>"


def _until(predicate, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_burst_of_shots_is_bounded_callers_that_left_are_dropped_and_version_checks_go_on(tmp_path):
    """20 shot.sh calls at once: one is checked, SHOTS_WAITING wait, every other one is told "busy,
    try again" at once (exit 3); the waiting ones whose callers are killed are dropped before their
    check; a version's load check submitted meanwhile ends before the running shot does; and the
    endpoint takes the next call as usual."""
    work, tools = tmp_path / "work", tmp_path / "tools"
    work.mkdir()
    tools.mkdir()
    (work / "game.html").write_bytes(SLOW)
    (work / "quick.html").write_bytes(QUICK)
    write_tools(tools)
    figures = ShotFigures()
    with BrowserService(QUICK_RENDERER, parallel=2).start(wait=True) as service:
        app = Starlette(routes=[shot_route(work, _quick_check_dict(None, service, URGENT), figures=figures)])
        server = AppServer(app, ["tcp:127.0.0.1:0"]).start()
        env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{server.tcp_port}/v1", "OPENAI_API_KEY": "run-key"}

        def shot_sh(*args: str) -> subprocess.Popen:
            # A session of its own: killing it takes curl with it, as a killed agent command would.
            return subprocess.Popen(["sh", str(tools / "shot.sh"), *args], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, start_new_session=True)

        try:
            checked = shot_sh()
            _until(lambda: figures.asked == 1, "the first call")
            leavers = [shot_sh() for _ in range(10)]
            _until(lambda: figures.asked == 11, "the leavers' calls")
            stayers = [shot_sh() for _ in range(9)]
            _until(lambda: figures.asked == 20, "the stayers' calls")
            for proc in leavers:
                os.killpg(proc.pid, signal.SIGKILL)
            version = service.submit(lambda browser: load_check(QUICK, browser=browser, opening=service.opening(ORDINARY)))
            assert version.result(60).loads
            assert checked.poll() is None, "the version's check waited for the shot to end"
            said = checked.communicate(timeout=120)[0]
            assert checked.returncode == 0 and "loads without errors: yes" in said, said
            for proc in stayers:
                out = proc.communicate(timeout=30)[0]
                assert proc.returncode == BUSY_EXIT and "busy, try again" in out, out
            for proc in leavers:
                proc.wait(30)
            _until(lambda: figures.dropped == SHOTS_WAITING, "the waiting leavers to be dropped", 10)
            assert figures.model_dump() == {"asked": 20, "answered": 1, "busy": 20 - 1 - SHOTS_WAITING,
                                            "dropped": SHOTS_WAITING}
            assert [p.name for p in (work / "shots").iterdir()] == ["shot-001.png"], "no check for a caller that left"
            # The line is free again: the next call is checked.
            again = shot_sh("quick.html")
            assert again.wait(60) == 0, again.stdout.read()
            assert figures.answered == 2
        finally:
            server.stop()
