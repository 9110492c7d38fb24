"""Only real demonstrations (issue #50), offscreen on the real tool runtime and store: a
session is saved as a demonstration when the person presses Finish, never because something
replaced the model. Load task → Discard (and New, Open) leave no new episode; Finish after
the same steps saves one, with its task."""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # these tests never need a display

import pytest  # noqa: E402
from studio_support import WAIT_MS, fresh_scene, send_ok, studio_window  # noqa: E402

TASK = "primitive_placement:1:42"


@pytest.fixture(scope="module")
def studio(qapp, worker_pool, tmp_path_factory, request):
    with studio_window(worker_pool, tmp_path_factory.mktemp("demos"), request) as window:
        yield window


@pytest.fixture
def fresh(studio, qtbot):
    return fresh_scene(studio, qtbot)


def episode_ids(c) -> set[str]:
    return {e.id for e in c.store().list_episodes()}


def test_load_task_then_discard_leaves_no_new_episode(fresh, qtbot):
    w, c = fresh, fresh.controller
    before = episode_ids(c)
    send_ok(qtbot, w, "add_primitive", kind="cube", name="Try", dimensions="1, 1, 1")
    send_ok(qtbot, w, "set_material", name="Try", color="#D03030")
    episode_id = c.demo.episode_id
    assert c.demo.active and c.store().episode(episode_id).status == "running"  # being recorded
    asked = []
    w.project.answer = lambda what: asked.append(what) or "discard"
    try:
        w.tasks.task_id.setText(TASK)
        with qtbot.waitSignal(c.sig_task_ready, timeout=WAIT_MS):
            w.tasks.load()  # the Task dock's Load task button
    finally:
        w.project.answer = None
    assert asked == ["Load task"]  # the model was modified: the person was asked, chose Discard
    assert episode_ids(c) == before  # no new episode: neither finished nor left behind
    assert not c.demo.active and episode_id not in c.session_episodes

    # the same kind of steps, then Finish: a demonstration, with its task and reward
    send_ok(qtbot, w, "add_primitive", kind="cube", name="Mine", dimensions="1, 1, 1")
    with qtbot.waitSignal(c.sig_episode_saved, timeout=WAIT_MS) as saved:
        assert w.tasks.review.finish()
    [new] = episode_ids(c) - before
    assert saved.args[0] == new
    episode = c.store().episode(new)
    assert episode.status == "finished" and episode.task_id == TASK and episode.reward is not None


def test_new_and_no_task_drop_an_unfinished_session_too(fresh, qtbot):
    w, c = fresh, fresh.controller
    before = episode_ids(c)
    send_ok(qtbot, w, "add_primitive", kind="cone", name="Draft", dimensions="1, 1, 1")
    assert c.demo.active
    w.project.answer = lambda what: "discard"
    try:
        w.project.new()  # File → New, Discard
    finally:
        w.project.answer = None
    qtbot.waitUntil(lambda: not c.scene.objects, timeout=WAIT_MS)
    assert episode_ids(c) == before and not c.demo.active
    send_ok(qtbot, w, "add_primitive", kind="cube", name="Kept", dimensions="1, 1, 1")
    qtbot.waitUntil(lambda: c.scene.names() == ["Kept"], timeout=WAIT_MS)
    c.load_task(None)  # "No task": the scene stays, the unfinished recording does not
    assert episode_ids(c) == before and not c.demo.active
    done = c.worker.submit(lambda s: s.scene(), "after")
    qtbot.waitUntil(done.done, timeout=WAIT_MS)
    assert [o["name"] for o in done.result()["objects"]] == ["Kept"]
