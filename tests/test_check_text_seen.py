"""Item 6b reads the text that reaches the screen: each forgery beside its honest twin.

Real Chromium. The twin shows a French HUD under paint effects that leave it readable and fails
6b. The forgeries show the same French and pad it with English no one sees (a filter's opacity(),
a blur, a transparent mask; a clip-path inset, a zero circle, a flat polygon, the legacy clip, a
zero-height box with contain: paint), or draw the French where no text node holds it (an SVG
data: image, an SVG background, the alt text of images that do not load): each fails 6b like the
twin. An honest page with English in those same images and alt texts keeps its point, its text read.
"""


import pytest

from showcase.check.models import CheckReport

from checked import check_pages, item

TWIN, FORGERIES, ENGLISH = "errtext_see_twin", ("errtext_see_filter", "errtext_see_clip", "errtext_see_img"), "errtext_see_english"
NAMES = [TWIN, *FORGERIES, ENGLISH]


@pytest.fixture(scope="module")
def scored() -> dict[str, CheckReport]:
    # three at a time: what these tests judge (text) does not depend on the frame rate
    return check_pages(NAMES, 3)


def test_the_french_twin_is_read_under_paint_effects_that_leave_it_readable(scored):
    twin = item(scored[TWIN], "6b")
    assert not twin.passed and twin.figures["likeliest_other"] == "fr", twin.figures
    assert "faites glisser" in twin.figures["text_sample"] and twin.figures["text_hidden"] == 0, twin.figures


def test_english_no_one_sees_and_french_drawn_as_images_fail_like_the_twin(scored):
    twin = item(scored[TWIN], "6b")
    for name in FORGERIES:
        six_b = item(scored[name], "6b")
        assert six_b.points <= twin.points and not six_b.passed, (name, six_b.figures)
        assert "Welcome" not in six_b.figures["text_sample"], (name, six_b.figures)
    assert item(scored["errtext_see_filter"], "6b").figures["text_hidden"] == 3
    assert item(scored["errtext_see_clip"], "6b").figures["text_hidden"] == 5
    img = item(scored["errtext_see_img"], "6b").figures
    assert img["text_sources"] == {"title": 1, "image": 2, "alt": 2}, img
    for words in ("faites glisser", "regarder autour", "nuages du soir", "visite en pause"):
        assert words in img["text_sample"], (words, img)


def test_english_in_images_and_alt_text_is_read_and_keeps_its_point(scored):
    english = item(scored[ENGLISH], "6b")
    assert english.passed, english.figures
    assert english.figures["text_sources"] == {"title": 1, "image": 2, "alt": 2, "text": 1}, english.figures
    for words in ("drag to orbit", "look around the islands", "evening clouds", "turn the camera", "Camera tour"):
        assert words in english.figures["text_sample"], (words, english.figures)
    # an SVG's <title> is a tooltip and display="none" hides a <text>: neither is drawn, neither is read
    assert "glisser" not in english.figures["text_sample"] and "visite du soir" not in english.figures["text_sample"]


def test_blurred_english_is_no_picture_either(scored):
    # the blur's halo reaches past the text's boxes: the mask of item 4 reaches as far
    twin, blurred = item(scored[TWIN], "4"), item(scored["errtext_see_filter"], "4")
    assert not twin.passed and not blurred.passed, (twin.figures, blurred.figures)
    assert scored["errtext_see_filter"].total <= scored[TWIN].total, scored["errtext_see_filter"].summary
