"""The run's browser service: a job still under way when the service closes gets an answer.

An agent can end while its shot.sh is being answered; the run then closes its browser. The
shot's caller waits on that job: it must get an error at once, or the run's process never exits.
A broken page is judged at its first error; a weighted service holds the check's CPU group.
"""

import asyncio
import os
import time

import pytest

from showcase.browser.service import BrowserService
from showcase.check.quick import QUICK_RENDERER, load_check
from showcase.errors import InfraError

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
    from showcase.check import cpu_share
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
