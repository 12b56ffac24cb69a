"""A page cannot tell the check from a person's browser by the usual tells (rubric 3.0), in real
Chromium: cloak_webdriver.html draws its world only where `navigator.webdriver` is true or the user
agent says HeadlessChrome; cloak_native.html only where a WebGL function, `getContext` or
`Function.prototype.toString` shows a wrapper's tell (source text, name, length, a prototype). A
person's browser shows each as black, like cloak_twin.html: each scores the twin's points.
"""

import pytest

from showcase.check.models import CheckReport

from checked import check_pages, item, points

CLOAKS = ["cloak_webdriver", "cloak_native"]


@pytest.fixture(scope="module")
def scored() -> dict[str, CheckReport]:
    return check_pages(["cloak_twin", *CLOAKS], at_once=2)


@pytest.mark.parametrize("page", CLOAKS)
def test_a_page_shows_the_check_what_it_shows_a_person(scored, page):
    report, twin = scored[page], scored["cloak_twin"]
    assert not item(twin, "4").passed, item(twin, "4").reason
    assert not item(report, "4").passed, item(report, "4").reason
    assert item(report, "6a").figures["canvas"]["triangles_per_frame"] == 0, item(report, "6a").figures
    assert report.total == twin.total, (points(report), points(twin))
