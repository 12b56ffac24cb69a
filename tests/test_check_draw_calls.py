"""Every way WebGL draws is counted, and no more than it draws (rubric 3.0), in real Chromium.

An honest world drawn with WebGL 2's drawRangeElements, WebGL 1's ANGLE_instanced_arrays, or
WEBGL_multi_draw (each of its four functions; and three.js's BatchedMesh, which draws with it) gets
the world size, parts and frame rate its twin gets drawing the same world with drawElements. A
forgery that draws its world with one multi-draw in one frame of 12, and in the others multi-draws
that draw nothing (a drawcount past its lists' end, offsets read from past their list's end, 2^31 - 1
draws, negative counts and instances, 5,000 draws of no vertex), counts only the world it drew; so
do pages whose frames between are draws WebGL refuses, before they start or in its GPU process. A
frame inside the page cannot change the top page's drawing state out of the probe's record.
"""

import pytest

from showcase.check.models import CheckReport

from checked import check_pages, item, points, total_but_item_4

# page -> its twin, drawn with drawElements
TWINS = {
    "draw_range": "draw_plain",
    "draw_angle": "draw_plain",
    "draw_multi": "draw_plain",
    "draw_batched": "draw_batched_twin",
}
FORGERY = "draw_multi_sparse"
BLOCKS = 144  # the raw pages' blocks, 12 triangles each
# The world drawn in one frame of 12 (refused_twin), and between, the world's draws sent where WebGL
# refuses them: with no program in use (refused before they start), from a vertex array without
# an index buffer, or with enabled attributes that have no buffer (refused in the GPU process).
REFUSED = ["refused_no_program", "refused_no_indices", "refused_no_buffer"]
# draw_plain's world, and a decoy of 103,680 triangles drawn with its colour writes turned off
# through another frame's copy of OES_draw_buffers_indexed's prototype (an empty or a srcdoc iframe)
CROSS_FRAME = ["iframe_ext_blank", "iframe_ext_srcdoc"]


@pytest.fixture(scope="module")
def scored() -> dict[str, CheckReport]:
    names = sorted(set(TWINS) | set(TWINS.values()) | {FORGERY, "refused_twin"} | set(REFUSED) | set(CROSS_FRAME))
    return check_pages(names, at_once=2)  # four at once read an honest frame after ready as blank at load 20-34


def drawn(report: CheckReport) -> dict:
    """What the probe counted of the largest frame: draws, parts and triangles."""
    return item(report, "6a").figures["canvas"]


@pytest.mark.parametrize("page", sorted(TWINS))
def test_a_world_drawn_through_any_entry_point_counts_as_its_twin(scored, page):
    report, twin = scored[page], scored[TWINS[page]]
    world, twin_world = item(report, "6a"), item(twin, "6a")
    assert twin_world.passed, twin_world.reason
    assert world.points == twin_world.points, (page, world.reason, twin_world.reason)
    assert (world.figures["parts"], world.figures["triangles"]) == (twin_world.figures["parts"], twin_world.figures["triangles"]), (
        page, world.figures, twin_world.figures)
    # the probe's own count of the largest frame: a multi-draw's and an instanced draw's parts are
    # its draws' and instances' (draw calls themselves differ: 1 to 4 calls against 144)
    assert (drawn(report)["parts_per_frame"], drawn(report)["triangles_per_frame"]) == (
        drawn(twin)["parts_per_frame"], drawn(twin)["triangles_per_frame"]), (page, drawn(report), drawn(twin))
    if page != "draw_batched":
        assert drawn(report)["parts_per_frame"] == BLOCKS and drawn(report)["triangles_per_frame"] == 12 * BLOCKS
    # every frame that drew is a frame of the world, as the twin's (the rate itself follows the load)
    for name in (page, TWINS[page]):
        fps = item(scored[name], "5").figures
        assert fps["frames"] == fps["drawn_frames"] > 0, (name, fps)


def test_multi_draws_that_draw_nothing_count_nothing(scored):
    """The world, drawn in one frame of 12, is counted as drawn: 144 blocks, no more. The frames
    between, whose multi-draws name the world's draws but draw nothing, are no frames of the world."""
    world = item(scored[FORGERY], "6a")
    assert drawn(scored[FORGERY])["parts_per_frame"] == drawn(scored["draw_multi"])["parts_per_frame"] == BLOCKS, world.figures
    assert drawn(scored[FORGERY])["triangles_per_frame"] == 12 * BLOCKS, world.figures
    fps = item(scored[FORGERY], "5")
    assert fps.figures["drawn_frames"] > 0 and fps.figures["frames"] * 6 <= fps.figures["drawn_frames"], fps.figures
    assert fps.figures["fps"] < 10 and fps.points == 0, fps.figures


@pytest.mark.parametrize("page", REFUSED)
def test_draws_webgl_refuses_are_no_frames_of_the_world(scored, page):
    """11 frames of 12 are draws WebGL refuses (the page reads the errors away): the frame rate is
    the twin's, about 5 pictures of the world a second, not the 60 frames the page calls draws in."""
    report, twin = scored[page], scored["refused_twin"]
    fps, twin_fps = item(report, "5"), item(twin, "5")
    assert twin_fps.figures["fps"] < 10, twin_fps.figures
    assert fps.figures["fps"] < 10 and fps.points <= twin_fps.points, (fps.figures, twin_fps.figures)
    assert total_but_item_4(report) <= total_but_item_4(twin), (points(report), points(twin))
    assert drawn(report) == drawn(twin), (drawn(report), drawn(twin))


@pytest.mark.parametrize("page", CROSS_FRAME)
def test_another_frame_cannot_turn_the_top_pages_colour_writes_off_unseen(scored, page):
    """The decoy drawn with colour writes turned off through an iframe's functions adds nothing:
    the page counts draw_plain's world, no more."""
    report, twin = scored[page], scored["draw_plain"]
    assert drawn(report)["triangles_per_frame"] == drawn(twin)["triangles_per_frame"] == 12 * BLOCKS, drawn(report)
    assert drawn(report)["parts_per_frame"] == BLOCKS, drawn(report)
    assert report.total <= twin.total
