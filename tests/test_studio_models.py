"""The studio's pure models (no Qt, no runtime): orbit camera, metrics tail, form parsing."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from studio.models.orbit import MAX_DISTANCE, MIN_DISTANCE, OrbitCamera
from studio.models.scene import SceneModel
from studio.palette.forms import FormError, parse
from studio.training.metrics import MetricsTail, RunMetrics


@given(st.lists(st.tuples(st.floats(-500, 500), st.floats(-500, 500)), max_size=30))
def test_orbit_keeps_its_distance_and_never_flips_over_the_pole(drags):
    cam = OrbitCamera(distance=5.0, target=[1.0, 2.0, 0.5])
    for dx, dy in drags:
        cam.orbit(dx, dy)
        assert -89.0 <= cam.elevation_deg <= 89.0
        assert math.dist(cam.location(), cam.target) == pytest.approx(5.0)


def test_zoom_is_bounded_and_pan_moves_the_target_across_the_view():
    cam = OrbitCamera(azimuth_deg=0.0, elevation_deg=0.0, distance=4.0)
    for _ in range(200):
        cam.zoom(1)
    assert cam.distance == MIN_DISTANCE
    for _ in range(200):
        cam.zoom(-1)
    assert cam.distance == MAX_DISTANCE
    cam = OrbitCamera(azimuth_deg=0.0, elevation_deg=0.0, distance=4.0)
    cam.pan(-100, 0, 400)  # camera on +X looking at the origin: screen-right is +Y
    assert cam.target[0] == pytest.approx(0.0) and cam.target[1] > 0 and cam.target[2] == pytest.approx(0.0)
    args = cam.render_args(384)
    assert args["size"] == 384 and args["camera"]["target"] == [round(v, 5) for v in cam.target]


def test_frame_aims_at_the_middle_of_the_scene():
    scene = SceneModel()
    scene.set_scene({"objects": [{"name": "A", "bbox_min": [0, 0, 0], "bbox_max": [2, 2, 2]},
                                 {"name": "B", "bbox_min": [4, 0, 0], "bbox_max": [6, 1, 1]}]})
    cam = OrbitCamera()
    cam.frame(scene.bounds())
    assert cam.target == [3.0, 1.0, 1.0] and cam.distance > math.dist([0, 0, 0], [6, 2, 2]) / 2


def test_metrics_tail_reads_only_complete_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    assert tail.read_new() == []  # not there yet
    path.write_text(json.dumps({"step": 1, "loss": 2.0}) + "\n" + '{"step": 2, "lo')
    assert tail.read_new() == [{"step": 1, "loss": 2.0}]
    with path.open("a") as f:
        f.write('ss": 1.5, "reward": 0.25, "reward/geometry": 0.5}\nnot json\n')
    rows = tail.read_new()
    assert rows == [{"step": 2, "loss": 1.5, "reward": 0.25, "reward/geometry": 0.5}]
    metrics = RunMetrics(total_steps=10, started_at=100.0)
    assert metrics.add([{"step": 1, "loss": 2.0}] + rows) == 4
    assert metrics.series["loss"] == [(1.0, 2.0), (2.0, 1.5)]
    assert metrics.progress() == pytest.approx(0.2)
    assert metrics.eta_s(now=110.0) == pytest.approx(40.0)  # 5 s a step, 8 steps left


@pytest.mark.parametrize(("text", "prop", "value"), [
    ("1, 2.5, -3", {"type": "array", "items": {"type": "number"}}, [1.0, 2.5, -3.0]),
    ("[1, 2]", {"type": "array", "items": {"type": "integer"}}, [1, 2]),
    ("7", {"type": "integer"}, 7),
    ('{"location": [1, 2, 3]}', {"type": "object"}, {"location": [1, 2, 3]}),
    ("A b", {"type": "string"}, "A b"),
])
def test_form_fields_parse_their_types(text, prop, value):
    assert parse(text, prop, "f") == value


@pytest.mark.parametrize(("text", "prop"), [
    ("1, x, 3", {"type": "array", "items": {"type": "number"}}),
    ("1.5", {"type": "integer"}),
    ("{bad", {"type": "object"}),
])
def test_form_fields_refuse_text_of_the_wrong_type(text, prop):
    with pytest.raises(FormError, match="^f: "):
        parse(text, prop, "f")
