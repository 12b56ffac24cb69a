"""Errors the page swallows and text it hides from the check: each forgery beside its honest twin.

Real Chromium. Errors: a page that cancels its `error` and `unhandledrejection` events (a capture
listener of its own that also stops the others; window.onerror returning true with
addEventListener replaced; console.error muted; in a srcdoc frame too, sandboxed or not) leaves nothing in the
browser's record, yet the probe saw each event first: the forgeries fail items 1 and 3 with as
many errors as their twin, which shows the same errors. Text: French in a closed shadow root,
German as ::before content, Spanish in a srcdoc frame, Portuguese in a field's value, English no
one sees padded around them; the twin shows English in the same places and keeps its point; and a
short Portuguese HUD line is not English.
"""


import pytest

from showcase.check.models import CheckReport
from showcase.check.rubric import load_rubric

from checked import check_pages, item

ERROR_TWIN, ERROR_FORGERIES = "errtext_err_twin", ("errtext_err_cancel", "errtext_err_onerror", "errtext_err_sandbox")
TEXT_TWIN, TEXT_FORGERIES = "errtext_text_twin", ("errtext_text_shadow", "errtext_text_frame")
NAMES = [ERROR_TWIN, *ERROR_FORGERIES, TEXT_TWIN, *TEXT_FORGERIES, "errtext_text_pt"]


@pytest.fixture(scope="module")
def scored() -> dict[str, CheckReport]:
    # three at a time: what these tests judge (errors, text) does not depend on the frame rate
    return check_pages(NAMES, 3)


def test_errors_the_page_cancels_count_as_the_errors_it_shows(scored):
    twin = scored[ERROR_TWIN]
    # the twin shows its errors: three while loading (one in its frame), four after ready, two rejections
    assert not item(twin, "1").passed and not item(twin, "3").passed
    assert item(twin, "3").figures["page_errors"] == 8, twin.errors
    assert item(twin, "2").passed and item(twin, "6b").passed  # what it keeps
    for name in ERROR_FORGERIES:
        report = scored[name]
        assert report.total <= twin.total, (name, report.summary)
        one, three = item(report, "1"), item(report, "3")
        assert one.points == 0 and "cancelled" in one.reason and "boom while loading" in one.reason, (name, one.reason)
        assert three.points == 0 and three.figures["page_errors"] == 8, (name, report.errors)
        assert three.figures["console_errors"] == 0  # muted: the errors came from the events, not the console
        assert any("thrown in the frame" in e for e in report.errors), (name, report.errors)
        assert any("rejected after ready" in e and "cancelled" in e for e in report.errors), (name, report.errors)


def test_text_hidden_from_the_dom_api_is_read_and_english_in_the_same_places_passes(scored):
    twin = item(scored[TEXT_TWIN], "6b")
    assert twin.passed, twin.reason
    assert {"shadow", "generated", "frame", "form", "title"} <= set(twin.figures["text_sources"]), twin.figures
    assert "WASD to move" in twin.figures["text_sample"] and "Drag to orbit" in twin.figures["text_sample"]
    assert twin.figures["text_hidden"] == 0
    for name in TEXT_FORGERIES:
        report = scored[name]
        assert report.total <= scored[TEXT_TWIN].total, (name, report.summary)
        assert not item(report, "6b").passed, (name, item(report, "6b").figures)
    shadow = item(scored["errtext_text_shadow"], "6b").figures
    assert "Faites glisser" in shadow["text_sample"] and "Ziehen zum Drehen" in shadow["text_sample"]
    frame = item(scored["errtext_text_frame"], "6b").figures
    assert "Arrastra para girar" in frame["text_sample"] and "Nome do explorador" in frame["text_sample"]
    # the English no one sees (transparent, clipped, off the page, a 1 px font) is not read
    assert frame["text_hidden"] == 4 and "Welcome" not in frame["text_sample"] and "village" not in frame["text_sample"]


def test_a_short_portuguese_hud_is_not_english(scored):
    english = item(scored["errtext_text_pt"], "6b")
    assert not english.passed and english.figures["words"] == 11, english.figures  # the title's 2 and the HUD's 9
    assert english.figures["other_to_english"] >= load_rubric().items["6b"]["min_odds"], english.figures
    assert "arraste para orbitar" in english.figures["text_sample"]
