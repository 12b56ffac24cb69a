"""Every way WebGL draws is counted, and no more than it draws (rubric 3.0), in real Chromium.

An honest world drawn with WebGL 2's drawRangeElements, WebGL 1's ANGLE_instanced_arrays, or
WEBGL_multi_draw (each of its four functions; and three.js's BatchedMesh, which draws with it) gets
the world size, parts and frame rate its twin gets drawing the same world with drawElements. A
forgery that draws its world with one multi-draw in one frame of 12, and in the others multi-draws
that draw nothing (a drawcount past its lists' end, offsets read from past their list's end, 2^31 - 1
draws, negative counts and instances, 5,000 draws of no vertex), counts only the world it drew.
"""

import pytest

from showcase.check.models import CheckReport

from checked import check_pages, item

# page -> its twin, drawn with drawElements
TWINS = {
    "draw_range": "draw_plain",
    "draw_angle": "draw_plain",
    "draw_multi": "draw_plain",
    "draw_batched": "draw_batched_twin",
}
FORGERY = "draw_multi_sparse"
BLOCKS = 144  # the raw pages' blocks, 12 triangles each


@pytest.fixture(scope="module")
def scored() -> dict[str, CheckReport]:
    names = sorted(set(TWINS) | set(TWINS.values()) | {FORGERY})
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
