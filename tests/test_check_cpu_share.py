"""The check's CPU group on the real cgroup file system: this process, what it starts and every
process of a sealed browser weigh the rubric's factor while a check holds the group, and the
process is back where it was after the last holder."""

import asyncio
import os
import subprocess
import uuid

from showcase.browser.launch import launch_browser
from showcase.browser.seal import browser_pid, proc_type, process_tree
from showcase.host import cpu_share
from showcase.check.rubric import load_rubric

GROUP = "/" + cpu_share.GROUP
FACTOR = load_rubric().cpu_weight_factor


def weight_file() -> str:
    """The group's weight as the kernel holds it (v1 cpu.shares or v2 cpu.weight)."""
    h = cpu_share._hierarchy()
    name = "cpu.shares" if h.version == 1 else "cpu.weight"
    return (h.mount / cpu_share.GROUP / name).read_text().strip()


def test_the_process_and_what_it_starts_are_in_the_group_and_come_back():
    home = cpu_share.group_of(os.getpid())
    assert home != GROUP
    with cpu_share.raised(FACTOR) as state:
        assert state.startswith("cgroup v") and GROUP in state, state
        assert cpu_share.group_of(os.getpid()) == GROUP
        expected = round(cpu_share.V1_DEFAULT_SHARES * FACTOR) if cpu_share._hierarchy().version == 1 else round(
            min(cpu_share.V2_MAX_WEIGHT, cpu_share.V2_DEFAULT_WEIGHT * FACTOR))
        assert weight_file() == str(expected)
        child = subprocess.Popen(["sleep", "30"])
        try:
            assert cpu_share.group_of(child.pid) == GROUP
        finally:
            child.kill()
            child.wait(10)
    assert cpu_share.group_of(os.getpid()) == home
    # a process started after the check is outside the group again
    after = subprocess.Popen(["sleep", "30"])
    try:
        assert cpu_share.group_of(after.pid) == home
    finally:
        after.kill()
        after.wait(10)


def test_two_holders_share_one_entry():
    home = cpu_share.group_of(os.getpid())
    with cpu_share.raised(FACTOR):
        with cpu_share.raised(FACTOR):
            assert cpu_share.group_of(os.getpid()) == GROUP
        # the first check is still running: it keeps the group
        assert cpu_share.group_of(os.getpid()) == GROUP
    assert cpu_share.group_of(os.getpid()) == home


def test_every_process_of_a_sealed_browser_is_in_the_group():
    marker = f"--showcase-share-test={uuid.uuid4().hex}"

    async def groups() -> dict[int, tuple[str, str | None]]:
        with cpu_share.raised(FACTOR):
            async with launch_browser("swiftshader", [marker]) as browser:
                page = await browser.new_page()
                await page.goto("about:blank")
                pid = browser_pid(marker)
                assert pid is not None
                return {p: (proc_type(p), cpu_share.group_of(p)) for p in process_tree(pid)}

    seen = asyncio.run(groups())
    kinds = {kind for kind, _ in seen.values()}
    assert {"browser", "renderer", "gpu-process"} <= kinds, kinds
    outside = {p: v for p, v in seen.items() if v[1] not in (GROUP, None)}
    assert not outside, outside
