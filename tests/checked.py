"""What the check's tests share: test pages scored a few at a time, and one item of a report."""

import asyncio
from pathlib import Path

from showcase.check.models import CheckReport
from showcase.check.runner import check_page

PAGES = Path(__file__).resolve().parent / "pages"


def item(report: CheckReport, id_: str):
    return next(i for i in report.items if i.id == id_)


def points(report: CheckReport) -> dict[str, float]:
    """Each item's points: what an assertion comparing a page with its twin shows when it fails."""
    return {i.id: i.points for i in report.items}


def total_but_item_4(report: CheckReport) -> float:
    """The total without item 4, for forgeries beside a twin that draws a few pictures a second: under
    load such a twin's frame after ready was once judged blank (nothing_twin 5.5 against its
    forgeries' 6.5, which draw every frame, load 13 in a clean-clone run), a slow page's weakness
    (docs/check.md, Limits), not what those forgeries forge."""
    return report.total - item(report, "4").points


def check_pages(names: list[str], at_once: int) -> dict[str, CheckReport]:
    """Each tests/pages/<name>.html scored, at most `at_once` checks at a time."""

    async def run():
        limit = asyncio.Semaphore(at_once)

        async def one(name: str) -> CheckReport:
            async with limit:
                return await check_page((PAGES / f"{name}.html").read_bytes(), page_name=name)

        return await asyncio.gather(*(one(n) for n in names))

    return dict(zip(names, asyncio.run(run())))
