"""The run's browser service: a job still under way when the service closes gets an answer.

An agent can end while its shot.sh is being answered; the run then closes its browser. The
shot's caller waits on that job: it must get an error at once, or the run's process never exits.
"""

import asyncio
import time

import pytest

from showcase.browser.service import BrowserService
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
