"""Draws no fragment of which reaches the screen count nothing (rubric 3.0), in real Chromium.

nothing_twin.html draws 40 blocks in one frame of 12 (about 5 pictures a second). Each nothing_*
forgery adds, in every frame, 360 blocks drawn where no fragment can pass: a stencil test or a depth
test that never passes, the screen's draw buffer set to NONE, a blend that keeps the destination
through the blend colour, a sample coverage of none, or into a framebuffer blitted into one pixel
or past the buffer's edge. Counted, they made the page's world 400 blocks
and its frame rate 30-56 fps. unseen_camera_twin.html shows a still view; its forgeries render
their touring camera three times a frame under a stencil or depth test that never passes: counted
as what WebGL drew with, the tour and the controls passed on draws nobody sees.
"""

import pytest

from showcase.check.models import CheckReport

from checked import check_pages, item, points, total_but_item_4

NOTHING = ["nothing_stencil", "nothing_depth", "nothing_drawbuffers", "nothing_blend_colour", "nothing_coverage",
           "nothing_blit_pixel", "nothing_blit_outside"]
UNSEEN_CAMERA = ["unseen_camera_stencil", "unseen_camera_depth"]


@pytest.fixture(scope="module")
def scored() -> dict[str, CheckReport]:
    return check_pages(["nothing_twin", *NOTHING, "unseen_camera_twin", *UNSEEN_CAMERA], at_once=2)


@pytest.mark.parametrize("page", NOTHING)
def test_blocks_no_fragment_of_which_can_pass_add_no_world_and_no_frames(scored, page):
    report, twin = scored[page], scored["nothing_twin"]
    world, twin_world = item(report, "6a").figures, item(twin, "6a").figures
    assert twin_world["parts"] == 40, twin_world
    assert (world["parts"], world["triangles"]) == (twin_world["parts"], twin_world["triangles"]), world
    fps = item(report, "5")
    assert fps.figures["fps"] < 10 and fps.points <= item(twin, "5").points, fps.figures
    assert total_but_item_4(report) <= total_but_item_4(twin), (points(report), points(twin))


@pytest.mark.parametrize("page", UNSEEN_CAMERA)
def test_a_camera_drawn_only_where_nothing_passes_is_no_tour(scored, page):
    report, twin = scored[page], scored["unseen_camera_twin"]
    for id_ in ("7", "8", "10"):
        assert item(report, id_).points <= item(twin, id_).points, (id_, item(report, id_).reason)
    assert report.total <= twin.total, (points(report), points(twin))
