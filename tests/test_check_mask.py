"""Item 4 leaves out the page's own text where it is painted, ink and all: each forgery beside its honest twin.

Real Chromium. The twin shows only its HUD's text, plainly, and fails item 4: text is no picture.
The forgeries show the same text and nothing else, painted so that a mask of the text boxes a
page script reads would leave part of it out: the DOM APIs such a script calls made to say there
is no text, a text-shadow below the text, a blur's halo, a drop-shadow() filter's copy, a line
scaled up by a transform (its stacked accents reach past its box as far as it is scaled), and text
held by no text node (generated content, a closed shadow root). Each fails item 4 like the twin.
An honest page with a WebGL world and a HUD drawn with shadows keeps item 4 and its tours.
"""

import pytest

from showcase.check.models import CheckReport

from checked import check_pages, item

TWIN = "mask_twin"
FORGERIES = ("mask_rects", "mask_shadow", "mask_blur", "mask_dropshadow", "mask_scaled", "mask_generated")
HONEST = "mask_world_hud"


@pytest.fixture(scope="module")
def scored() -> dict[str, CheckReport]:
    names = [TWIN, *FORGERIES, HONEST]
    # three at a time: item 4 is judged on the frame after ready, not on the frame rate
    return check_pages(names, at_once=3)


def test_text_alone_is_not_a_picture_however_it_is_painted(scored):
    twin = item(scored[TWIN], "4")
    assert not twin.passed and twin.figures["off_dominant_share"] < 0.002, twin.figures
    for name in FORGERIES:
        blank = item(scored[name], "4")
        assert not blank.passed, (name, blank.figures)
        assert blank.figures["off_dominant_share"] < 0.002, (name, blank.figures)
        assert scored[name].total <= scored[TWIN].total, (name, scored[name].summary)


def test_a_world_under_a_hud_drawn_with_shadows_is_not_blank(scored):
    report = scored[HONEST]
    blank = item(report, "4")
    assert blank.passed and blank.figures["screen_share"] >= 10 * blank.figures["min_share"], blank.figures
    for id_ in ("7", "8"):
        assert item(report, id_).passed, (id_, item(report, id_).reason)
