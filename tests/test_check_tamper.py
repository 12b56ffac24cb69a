"""Pages that try to forge their score, each scored beside its untampered twin: none may score more.

Nothing a page script can reach decides a point (rubric 2.0): the probe is out of its reach,
frames are counted by the probe's own loop, draws by wrappers that keep the native functions,
and tour, animation and controls need the real screenshots to change. Real Chromium throughout.
"""


import pytest

from showcase.check.models import CheckReport

from checked import check_pages, item

# tampered page -> its untampered twin
TWINS = {
    "tamper_forge": "css_only",        # v1's forged 10/10: replaced probe, fake scene and camera, no WebGL
    "tamper_scene": "static_webgl",    # a fake window.scene whose camera tours over a picture drawn once
    "tamper_ready": "good",            # a window.ready getter that says true before the world exists
    "tamper_raf": "good",              # requestAnimationFrame flooded, performance.now sped up
    "tamper_getcontext": "good",       # getContext stubbed, draw functions called on non-contexts
    "black_canvas": "good",            # everything moves, nothing is seen
    "tamper_refused_draws": "tiny_webgl",  # draws WebGL refuses (no program), each claiming 180k triangles
    "tamper_frame_errors": "tiny_webgl",   # the same, their errors cleared by an iframe's native getError
    "tamper_css_motion": "tiny_webgl",     # a fake scene touring over motion WebGL never drew (CSS, a 2D canvas)
}


@pytest.fixture(scope="module")
def scored() -> dict[str, CheckReport]:
    names = sorted(set(TWINS) | set(TWINS.values()) | {"freeze_late", "tamper_fresh_canvas"})

    return check_pages(names, 4)


@pytest.mark.parametrize("tampered", list(TWINS))
def test_a_tampered_page_scores_no_more_than_its_twin(scored, tampered):
    twin = scored[TWINS[tampered]]
    report = scored[tampered]
    assert report.total <= twin.total, (report.summary, twin.summary)


def test_the_v1_forgery_earns_nothing_it_claimed(scored):
    report = scored["tamper_forge"]
    for id_ in ("5", "6a", "7", "8", "9", "10"):
        assert item(report, id_).points == 0, (id_, item(report, id_).reason)
    assert item(report, "6a").figures["canvas"]["triangles_per_frame"] == 0


def test_a_fake_scene_over_a_still_picture_shows_no_tour_animation_or_controls(scored):
    report, twin = scored["tamper_scene"], scored["static_webgl"]
    for id_ in ("7", "8", "9", "10"):
        assert not item(report, id_).passed, (id_, item(report, id_).reason)
    assert "picture did not change" in item(report, "7").reason
    # its 5,000 fake nodes are not backed by what it drew: at most 4 times what it drew counts
    assert item(report, "6a").figures["scene_parts"] == 5000
    assert item(report, "6a").figures["parts"] <= 4 * item(twin, "6a").figures["canvas"]["parts_per_frame"]


def test_flooded_animation_frames_and_a_fast_clock_do_not_raise_the_frame_rate(scored):
    fake, real = item(scored["tamper_raf"], "5").figures["fps"], item(scored["good"], "5").figures["fps"]
    assert fake <= max(real * 1.5, real + 3), (fake, real)
    assert item(scored["tamper_raf"], "5").points <= item(scored["good"], "5").points


def test_stubbed_get_context_and_forged_draws_count_nothing(scored):
    report = scored["tamper_getcontext"]
    canvas = item(report, "6a").figures["canvas"]
    assert canvas["draws_per_frame"] == 0 and canvas["triangles_per_frame"] == 0
    assert not item(report, "4").passed and not item(report, "7").passed


def test_a_ready_that_lies_is_judged_on_the_frame_it_claims(scored):
    report = scored["tamper_ready"]
    assert item(report, "2").passed and not item(report, "4").passed


def test_a_black_canvas_whose_camera_moves_earns_no_tour_animation_or_controls(scored):
    report = scored["black_canvas"]
    for id_ in ("4", "7", "8", "9", "10"):
        assert not item(report, id_).passed, (id_, item(report, id_).reason)


def test_a_page_that_freezes_after_ready_keeps_its_world_and_english(scored):
    report = scored["freeze_late"]
    assert report.frozen
    assert item(report, "6a").passed and item(report, "6a").figures["parts"] == 145
    assert item(report, "6b").passed and item(report, "4").passed


def test_the_tiny_twin_whose_canvas_nobody_sees_earns_no_frame_rate_and_is_blank(scored):
    """tiny_webgl.html draws one triangle a frame in a 16 x 16 canvas at opacity 0.01 (rubric 3.0:
    only what a person sees counts; until 2.7 it earned the frame rate)."""
    report = scored["tiny_webgl"]
    fps, blank = item(report, "5"), item(report, "4")
    assert fps.points == 0 and fps.figures["frames"] == 0 and fps.figures["drawn_frames"] > 0, fps.figures
    assert not blank.passed and blank.figures["webgl_seen_share"] == 0 and blank.figures["screen_share"] > 0.002


@pytest.mark.parametrize("tampered", ["tamper_refused_draws", "tamper_frame_errors"])
def test_draws_webgl_refused_count_toward_no_world(scored, tampered):
    report = scored[tampered]
    assert item(report, "6a").points == 0 and item(report, "6a").figures["canvas"]["triangles_per_frame"] == 0, \
        item(report, "6a").reason


def test_a_fake_camera_over_motion_webgl_never_drew_earns_no_tour_animation_or_controls(scored):
    """Its screenshots change (a sliding CSS gradient, a 2D canvas that follows the camera and the
    wheel) and its fake camera tours and answers; what WebGL drew stayed the same."""
    report = scored["tamper_css_motion"]
    # the same still picture in a fresh full-view canvas every 300 ms is no change either
    for page in ("tamper_css_motion", "tamper_fresh_canvas"):
        for id_ in ("7", "8", "9", "10"):
            it = item(scored[page], id_)
            # (3.0: the forged nodes of tamper_css_motion have no material: nothing is drawn to move)
            why = ("WebGL drew", "nothing in the world moves") if id_ == "9" else ("WebGL drew",)
            assert not it.passed and any(w in it.reason for w in why), (page, id_, it.reason)
    assert item(report, "7").figures["pixel_share"] >= 0.08 and item(report, "7").figures["gl_share"] == 0
    assert report.webgl_pictures is True
    # the pages with real motion keep their items, the WebGL change beside the screenshots'
    good = scored["good"]
    for id_ in ("7", "8", "9", "10"):
        assert item(good, id_).passed, (id_, item(good, id_).reason)
    assert item(good, "7").figures["gl_share"] >= 0.5 * item(good, "7").figures["pixel_share"]
