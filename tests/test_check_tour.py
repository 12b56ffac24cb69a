"""Tour and animation from the view WebGL really drew with (rubric 3.0), in real Chromium.

Forged pages beside their honest twins (the same page without the trick): none may score more
than its twin, on the total (the frame rate aside: it follows the machine, not the trick) and on
the items of its class, and each twin keeps its points. Plus two honest pages the check misread
before: a world still being built under a still camera, and a camera that only turns.
"""


import pytest

from showcase.check.models import CheckReport

from checked import check_pages, item

TWINS = {
    # 1: a camera nobody renders with, over a sea whose waves a shader moves under a still view
    "tour_fake_camera": "tour_sea",           # a touring camera handed to scene.onBeforeRender
    "tour_second_camera": "tour_sea",         # a touring camera rendered into a target never shown
    # 3: a flat picture drawn through WebGL
    "tour_plasma_webgl": "tour_plasma_2d",    # a plasma on one subdivided quad, straight in clip space
    "tour_plasma_quads": "tour_plasma_quads_scene",  # plasma quads before a still camera, no window.scene
    # 5: animation by nodes never drawn
    "tour_hidden_spinner": "tour_garden",     # a visible = false cube spinning, its uniform changing
    "tour_empty_nodes": "tour_garden",        # empty nodes, a cube on an unseen layer, an invisible material
}
HONEST = ["tour_building", "tour_yaw"]


def but_frame_rate(report: CheckReport) -> float:
    return round(report.total - item(report, "5").points, 2)


def no_more(forged: CheckReport, twin: CheckReport, ids: tuple[str, ...]) -> None:
    assert but_frame_rate(forged) <= but_frame_rate(twin), (forged.summary, twin.summary)
    for id_ in ids:
        assert item(forged, id_).points <= item(twin, id_).points, (id_, item(forged, id_).reason, item(twin, id_).reason)


@pytest.fixture(scope="module")
def scored() -> dict[str, CheckReport]:
    names = sorted(set(TWINS) | set(TWINS.values()) | set(HONEST))

    return check_pages(names, 4)


def test_a_camera_nobody_renders_with_earns_no_tour_or_controls(scored):
    twin = scored["tour_sea"]
    for name in ("tour_fake_camera", "tour_second_camera"):
        report = scored[name]
        no_more(report, twin, ("7", "8", "10"))
        for id_ in ("7", "8"):
            tour = item(report, id_)
            # the camera object did tour, and the view WebGL drew with did not move with it
            assert tour.figures["max_degrees"] >= 10 and tour.figures["camera_drawn"] is False, (name, tour.reason)
            assert not tour.passed and "camera nobody renders with" in tour.reason, (name, tour.reason)
            assert tour.figures["view"]["claimed_explained"] < 0.5
        ten = item(report, "10")
        assert not ten.passed and ten.figures["measured_by"] == "pixels" and ten.figures["camera_drawn"]["refuted"] >= 1
    # the twin keeps its points: a sea that moves by itself is animation, and a world
    for id_ in ("6a", "9"):
        assert item(twin, id_).passed, (id_, item(twin, id_).reason)


def test_a_flat_picture_drawn_through_webgl_is_no_world_tour_or_animation(scored):
    flat, flat_twin = scored["tour_plasma_webgl"], scored["tour_plasma_2d"]
    no_more(flat, flat_twin, ("6a", "7", "8", "9"))
    assert item(flat, "6a").figures["canvas"]["triangles_per_frame"] == 0
    for id_ in ("7", "8", "9"):
        assert not item(flat, id_).passed and "flat pictures" in item(flat, id_).reason, (id_, item(flat, id_).reason)
    quads, quads_twin = scored["tour_plasma_quads"], scored["tour_plasma_quads_scene"]
    no_more(quads, quads_twin, ("6a", "7", "8", "9"))
    for id_ in ("7", "8"):
        tour = item(quads, id_)
        assert tour.figures["pixel_share"] >= 0.08 and not tour.passed and "view did not move" in tour.reason, tour.reason
    # the twin, which says what it is, keeps its world and its shader's animation
    assert item(quads_twin, "6a").passed and item(quads_twin, "9").passed


def test_animation_by_nodes_never_drawn_does_not_count(scored):
    twin = scored["tour_garden"]
    for name in ("tour_hidden_spinner", "tour_empty_nodes"):
        report = scored[name]
        no_more(report, twin, ("9",))
        anim = item(report, "9")
        assert not anim.passed and anim.figures["nodes"] == 0 and anim.figures["uniform_materials"] == 0, (name, anim.reason)
    # the twin's tour and controls stand, confirmed by what WebGL drew with
    for id_ in ("7", "8", "10"):
        assert item(twin, id_).passed, (id_, item(twin, id_).reason)
    assert item(twin, "7").figures["camera_drawn"] is True and item(twin, "7").figures["view"]["claimed_explained"] >= 0.9


def test_a_world_being_built_is_no_tour_and_a_turning_camera_no_animation(scored):
    """Honest pages without window.scene that the pixel fallback misread."""
    building = scored["tour_building"]
    for id_ in ("7", "8"):
        tour = item(building, id_)
        assert tour.figures["pixel_share"] >= 0.08 and not tour.passed and "view did not move" in tour.reason, tour.reason
    assert item(building, "9").passed, item(building, "9").reason
    turning = scored["tour_yaw"]
    for id_ in ("7", "8"):
        assert item(turning, id_).passed, item(turning, id_).reason
    anim = item(turning, "9")
    assert not anim.passed and "only as the view moved" in anim.reason, anim.reason
