"""The studio's window on the real tool runtime (offscreen Qt): every dock, recording,
replay, undo, a worker crash, training and the model server dock."""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # these tests never need a display

import json  # noqa: E402
import threading  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

import pytest  # noqa: E402
from studio_support import fresh_scene, send, studio_window  # noqa: E402

TASK = "primitive_placement:1:42"


@pytest.fixture(scope="module")
def studio(qapp, worker_pool, tmp_path_factory, request):
    """One studio window for the module, its session on the shared warm worker pool."""
    with studio_window(worker_pool, tmp_path_factory.mktemp("studio"), request) as window:
        yield window


@pytest.fixture
def gui_thread_round_trips(monkeypatch):
    """Every worker round trip goes through ToolSession._send: record the ones made on the
    GUI thread (there must be none: the GUI never waits on Blender or CadQuery). A check of
    where the work runs, not of how long anything took, so a busy machine cannot fail it."""
    from tools.runtime.session import ToolSession

    seen: list[str] = []
    real = ToolSession._send

    def send(self, payload, deadline_s, what):
        if threading.current_thread() is threading.main_thread():
            seen.append(what)
        return real(self, payload, deadline_s, what)

    monkeypatch.setattr(ToolSession, "_send", send)
    return seen


@pytest.fixture
def fresh(studio, qtbot):
    """An empty scene, no task, no demonstration in progress."""
    return fresh_scene(studio, qtbot)


def test_agent_run_streams_steps_records_and_keeps_the_gui_responsive(fresh, qtbot,
                                                                      gui_thread_round_trips):
    from studio.probe import LatenessProbe

    w = fresh
    with qtbot.waitSignal(w.controller.sig_task_ready, timeout=120_000):
        w.controller.load_task(TASK)
    assert "Globe" in w.tasks.prompt.text()
    kinds: list[str] = []
    w.agent.runner = None
    probe = LatenessProbe()
    probe.start()
    w.agent.policy.setCurrentText("oracle")
    w.agent.approval.setChecked(False)
    w.agent.sig_event.connect(lambda kind, data: kinds.append(kind))
    with qtbot.waitSignal(w.agent.sig_finished, timeout=120_000) as done:
        w.agent.run()
    probe.stop()
    summary = done.args[0]
    assert summary["status"] == "done" and summary["success"] is True and summary["reward"] == 1.0
    assert {"step_started", "call", "result", "render", "done"} <= set(kinds)
    texts = [w.agent.steps.item(i).text() for i in range(w.agent.steps.count())]
    assert any(t.startswith("call add_primitive") for t in texts)
    assert any(not w.agent.steps.item(i).icon().isNull() for i in range(w.agent.steps.count()))
    qtbot.waitUntil(lambda: w.outliner.names() == ["Globe"], timeout=120_000)
    store = w.controller.store()
    assert store.episode(summary["episode_id"]).status == "running"  # open for the person's turns
    w.controller.finish_demonstration()  # Finish: checked against the task, then closed
    qtbot.waitUntil(lambda: store.episode(summary["episode_id"]).status == "finished", timeout=120_000)
    episode = store.episode(summary["episode_id"])
    assert episode.source == "oracle" and episode.success
    assert probe.samples_ms  # the event loop kept turning during the run
    assert gui_thread_round_trips == []  # and never waited on the worker


def test_stop_ends_a_run_mid_way(fresh, qtbot, tmp_path):
    w = fresh
    script = tmp_path / "many.jsonl"
    script.write_text("".join(json.dumps({"tool": "add_primitive", "args": {
        "kind": "cube", "name": f"C{i}", "dimensions": [0.5, 0.5, 0.5], "location": [i, 0, 0]}}) + "\n"
        for i in range(12)))
    from studio.agent.runner import AgentRequest

    w.agent.run(AgentRequest(policy=f"script:{script}", goal="twelve cubes", max_steps=12))
    qtbot.waitUntil(lambda: w.agent.steps_seen >= 2, timeout=120_000)
    with qtbot.waitSignal(w.agent.sig_finished, timeout=120_000) as done:
        w.agent.stop()
    assert done.args[0]["status"] == "cancelled"
    assert done.args[0]["steps"] < 12
    assert w.agent.run_button.isEnabled()


def test_risky_tool_waits_for_approval_and_a_rejection_reaches_the_model(fresh, qtbot, tmp_path):
    w = fresh
    script = tmp_path / "export.jsonl"
    script.write_text(json.dumps({"tool": "export", "args": {"format": "glb", "path": "out.glb"}}) + "\n")
    from studio.agent.runner import AgentRequest

    w.agent.approval.setChecked(True)
    results: list[dict] = []
    w.agent.sig_event.connect(lambda k, d: results.append(d) if k == "result" else None)
    w.agent.run(AgentRequest(policy=f"script:{script}", goal="export", record=False))
    qtbot.waitUntil(lambda: w.agent.banner.isVisible(), timeout=120_000)
    with qtbot.waitSignal(w.agent.sig_finished, timeout=120_000):
        w.agent.answer(False)
    assert results and not results[0]["ok"] and "rejected" in results[0]["text"]


def test_palette_refuses_bad_values_before_sending(fresh, qtbot):
    w = fresh
    seen: list = []
    w.controller.worker.sig_call.connect(lambda r, o: seen.append(r))
    p = w.palette
    for values in ({"name": "A", "dimensions": "1, x, 1"},  # not a number
                   {"name": "A", "dimensions": "1, 1"},  # two values, three needed
                   {"name": "bad/name!", "dimensions": "1, 1, 1"},  # name pattern
                   {"name": "A", "dimensions": "1, 1, 1", "location": "0, 0, 1e9"}):  # out of range
        p.select("add_primitive", kind="cube", **values)
        assert not p.send()
        assert p.error.text().startswith("Not sent")
    p.select("set_material", name="A", color="red")
    assert not p.send() and "color" in p.error.text()
    qapp_process(qtbot)
    assert seen == []  # nothing reached the runtime
    # the form keeps what was typed per tool: the out-of-range location is still there
    result = send(qtbot, w, "add_primitive", kind="cube", name="A", dimensions="1, 1, 1", location="0, 0, 0")
    assert result.ok and p.error.text() == ""


def qapp_process(qtbot):
    qtbot.wait(50)  # let any queued signal arrive (there must be none)


def test_manual_steps_undo_redo_outliner_and_a_replayable_human_episode(fresh, qtbot):
    w = fresh
    c = w.controller
    send(qtbot, w, "add_primitive", kind="cube", name="A", dimensions="1, 1, 1")
    send(qtbot, w, "add_primitive", kind="uv_sphere", name="S", dimensions="0.5, 0.5, 0.5", location="0, 0, 1")
    qtbot.waitUntil(lambda: w.outliner.names() == ["A", "S"], timeout=120_000)
    with qtbot.waitSignal(c.sig_call, timeout=120_000):
        w.outliner.rename("A", "Base")
    qtbot.waitUntil(lambda: w.outliner.names() == ["Base", "S"], timeout=120_000)
    c.scene.select("S")
    assert w.outliner.tree.currentItem().text(0) == "S"
    with qtbot.waitSignal(c.sig_call, timeout=120_000):
        w.outliner.delete_selected()
    qtbot.waitUntil(lambda: w.outliner.names() == ["Base"], timeout=120_000)
    assert c.undo_stack.count() == 4
    with qtbot.waitSignal(c.sig_call, timeout=120_000):
        w.history.undo_button.click()  # brings S back
    qtbot.waitUntil(lambda: w.outliner.names() == ["Base", "S"], timeout=120_000)
    with qtbot.waitSignal(c.sig_call, timeout=120_000):
        w.history.undo_button.click()  # Base is A again
    qtbot.waitUntil(lambda: w.outliner.names() == ["A", "S"], timeout=120_000)
    with qtbot.waitSignal(c.sig_call, timeout=120_000):
        w.history.redo_button.click()
    qtbot.waitUntil(lambda: w.outliner.names() == ["Base", "S"], timeout=120_000)
    episode_id = c.demo.episode_id
    assert c.demo.active and len(c.demo.calls) == 7
    c.finish_demonstration()
    store = c.store()
    episode = store.episode(episode_id)
    assert episode.source == "human" and episode.status == "finished" and episode.n_steps == 7
    w.episodes.refresh()
    w.episodes.select_episode(episode_id)
    assert w.episodes.timeline.count() == 7
    w.episodes.last_replay = None
    w.episodes.replay(episode_id)
    qtbot.waitUntil(lambda: w.episodes.last_replay is not None, timeout=120_000)
    assert w.episodes.last_replay.matched, w.episodes.last_replay.summary()
    qtbot.waitUntil(lambda: w.outliner.names() == ["Base", "S"], timeout=120_000)
    # restore the scene as it was after step 0 (only A)
    w.episodes.steps_of = store.steps(episode_id)
    w.episodes.restore(episode, 0)
    qtbot.waitUntil(lambda: w.outliner.names() == ["A"], timeout=120_000)
    w.episodes.select_episode(episode_id)
    asked = []
    w.episodes.answer_delete = lambda q: asked.append(q) and False  # Cancel: nothing goes
    assert not w.episodes.delete_selected()
    assert episode_id in [e.id for e in store.list_episodes()] and episode_id in asked[0]
    w.episodes.answer_delete = lambda q: True
    assert w.episodes.delete_selected()
    assert episode_id not in [e.id for e in store.list_episodes()]
    assert episode_id not in [e.id for e in w.episodes.episodes]  # the list follows


def test_worker_crash_shows_an_error_and_the_studio_keeps_working(fresh, qtbot):
    w = fresh
    worker = w.controller.worker
    with qtbot.waitSignal(w.controller.sig_error, timeout=120_000) as err:
        # a real crash of the worker process, reported the way a crashing tool call is
        worker.submit(lambda s: worker.sig_call.emit(s._fault("segfault"), "system"), "fault")
    assert "crashed" in err.args[0]
    assert w.errors.isVisible() and "crashed" in w.errors.text.text()
    result = send(qtbot, w, "add_primitive", kind="cone", name="After", dimensions="1, 1, 1")
    assert result.ok
    qtbot.waitUntil(lambda: w.outliner.names() == ["After"], timeout=120_000)


def test_viewport_orbit_coalesces_and_standard_views_render(fresh, qtbot):
    w = fresh
    send(qtbot, w, "add_primitive", kind="torus", name="T", dimensions="1, 1, 0.3")
    v = w.viewport_panel.viewport
    with qtbot.waitSignal(v.sig_frame, timeout=120_000):
        v.request()
    shown = v.frames
    for _ in range(15):  # a drag: 15 draft requests while the worker is busy
        v.drag_by(12, 3)
    with qtbot.waitSignal(v.sig_frame, timeout=120_000, check_params_cb=lambda r: not r.draft):
        v.request()  # the release: one full frame
    assert v.frames - shown < 15  # stale requests were dropped, not queued
    assert v.pixmap.width() == v.size
    w.viewport_panel.mode.setCurrentText("front")
    with qtbot.waitSignal(v.sig_frame, timeout=120_000):
        pass
    w.viewport_panel.mode.setCurrentText("montage")
    with qtbot.waitSignal(v.sig_frame, timeout=120_000):
        pass
    png = w.viewport_panel.capture_png()
    assert png.startswith(b"\x89PNG")
    w.viewport_panel.send_to_agent()
    assert w.agent.attachment == png or w.agent.attachment.startswith(b"\x89PNG")


class _Models(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = json.dumps({"data": [{"id": "base"}, {"id": "mw-v1", "parent": "base"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_server_dock_says_clearly_that_vllm_is_missing_and_tests_connections(studio, qtbot):
    dock = studio.server
    dock.model.setText("/nonexistent/model")
    with qtbot.waitSignal(dock.sig_status, timeout=120_000) as status:
        dock.start()
    assert "vLLM is not installed" in status.args[0] and "oracle" in status.args[0]
    assert not dock.running
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        dock.endpoint.setText(f"http://127.0.0.1:{server.server_port}")
        with qtbot.waitSignal(dock.sig_models, timeout=120_000):
            dock.test_connection()
        assert dock.adapters.count() == 2 and "adapter of base" in dock.adapters.item(1).text()
    finally:
        server.shutdown()
        server.server_close()
    dock.endpoint.setText(f"http://127.0.0.1:{server.server_port}")  # now closed
    with qtbot.waitSignal(dock.sig_status, timeout=120_000,
                          check_params_cb=lambda m: m.startswith("No model server")):
        dock.test_connection()


def test_settings_and_layout_persist(studio, qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from studio.controller import StudioController
    from studio.window import MainWindow

    studio.agent.policy.setCurrentText("openai")
    studio.agent.settings.setValue("agent/policy", "openai")
    studio.set_theme("light")
    studio.docks["Model server"].hide()
    studio.save_layout()
    ini = studio.settings.fileName()
    again = MainWindow(StudioController(session_factory=lambda: None), QSettings(ini, QSettings.Format.IniFormat))
    try:
        assert again.agent.policy.currentText() == "openai"
        assert again.settings.value("theme") == "light"
        assert again.docks["Model server"].isHidden() and not again.docks["Agent"].isHidden()
    finally:
        studio.docks["Model server"].show()
        studio.set_theme("dark")
        studio.agent.policy.setCurrentText("oracle")
        again.deleteLater()


def test_training_dock_trains_plots_live_and_stops_cleanly(studio, qtbot, tmp_path, tiny_model_dir,
                                                           gui_thread_round_trips):
    """The real trainer as a child process: SFT of the tiny model on the episodes this
    module recorded (exported from the studio's store), plotted from metrics.jsonl, stopped."""
    from studio.probe import LatenessProbe

    store = studio.controller.store()
    if not [e for e in store.list_episodes() if e.success]:  # when run alone: record one
        from studio.agent.runner import AgentRequest

        with qtbot.waitSignal(studio.controller.sig_task_ready, timeout=120_000):
            studio.controller.load_task(TASK)  # Finish checks the run against it
        with qtbot.waitSignal(studio.agent.sig_finished, timeout=120_000):
            studio.agent.run(AgentRequest(policy="oracle", task_id=TASK))
        with qtbot.waitSignal(studio.controller.sig_episode_saved, timeout=120_000):
            studio.controller.finish_demonstration()  # the run's episode stays open until Finish
    data = tmp_path / "demos"
    studio.episodes.refresh()
    studio.episodes.table.selectAll()
    studio.episodes.export_selected(str(data))  # the Episodes dock's Export
    assert (data / "episodes.parquet").is_file()
    config = tmp_path / "sft.yaml"
    config.write_text(
        f"kind: sft\nmodel: {{path: {tiny_model_dir}}}\ntools: [add_primitive, set_material, delete]\n"
        f"lora: {{r: 4, alpha: 8}}\nrun: {{save_steps: 1000, report_to: []}}\n"
        f"sft: {{data: [{data / 'episodes.parquet'}], max_steps: 500, learning_rate: 1.0e-3}}\n")
    dock = studio.training
    dock.kind.setCurrentText("sft")
    dock.config.setText(str(config))
    dock.out.setText(str(tmp_path / "run"))
    dock.extra.setText("")
    probe = LatenessProbe()
    probe.start()
    dock.launch()
    assert dock.running
    qtbot.waitUntil(lambda: len(dock.metrics.series.get("loss", [])) >= 2 or not dock.running, timeout=120_000)
    assert dock.running, dock.log.toPlainText()[-2000:]
    assert dock.progress.value() > 0 and "step" in dock.eta.text()
    with qtbot.waitSignal(dock.sig_stopped, timeout=120_000):
        dock.stop()
    probe.stop()
    assert not dock.running and dock.launch_button.isEnabled()
    assert dock.loss_plot.series["loss"][1][0] > dock.loss_plot.series["loss"][0][0]
    assert probe.samples_ms and gui_thread_round_trips == []


def test_outliner_show_hide_and_viewport_wireframe(fresh, qtbot):
    from PySide6.QtCore import Qt

    w = fresh
    c = w.controller
    send(qtbot, w, "add_primitive", kind="cube", name="Box", dimensions="1, 1, 1")
    qtbot.waitUntil(lambda: w.outliner.names() == ["Box"], timeout=120_000)
    item = w.outliner._find("Box")
    assert item.checkState(0) == Qt.CheckState.Checked
    with qtbot.waitSignal(c.sig_call, timeout=120_000):
        item.setCheckState(0, Qt.CheckState.Unchecked)  # the person unticks the box
    qtbot.waitUntil(lambda: [o.get("visible") for o in c.scene.objects] == [False], timeout=120_000)
    qtbot.waitUntil(lambda: w.outliner._find("Box").checkState(0) == Qt.CheckState.Unchecked, timeout=120_000)
    v = w.viewport_panel.viewport
    with qtbot.waitSignal(v.sig_frame, timeout=120_000, check_params_cb=lambda r: r.args.get("shading") == "wireframe"):
        w.viewport_panel.wireframe.setChecked(True)
    w.viewport_panel.wireframe.setChecked(False)


def test_the_agent_dock_lists_registered_models_with_their_adapters(studio, tmp_path):
    """The packaged base is the hf policy's default; a registered adapter sits under its base
    and choosing it fills the policy, the model and the adapter (agents/models/registry.py)."""
    from agents.models.registry import BASE_NAME, add

    dock = studio.agent
    dock.policy.setCurrentText("hf")
    dock.model.setText("")
    assert dock.request().policy == f"hf:{BASE_NAME}"
    adapter = tmp_path / "run" / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "base_model_name_or_path": BASE_NAME}))
    add(str(adapter), data_dir=studio.controller.data_dir)
    dock.policy.setCurrentText("oracle")
    dock.fill_local()
    items = [dock.local.itemText(i) for i in range(dock.local.count())]
    base_at = next(i for i, t in enumerate(items) if t.startswith(BASE_NAME))
    run_at = items.index("    run (adapter)")  # under the base it was trained on
    assert run_at > base_at and all(t.startswith("    ") for t in items[base_at + 1:run_at]), items
    dock.local.activated.emit(run_at)
    assert (dock.policy.currentText(), dock.model.text()) == ("hf", BASE_NAME)
    assert dock.adapter.text() == str(adapter.resolve())
    request = dock.request()
    assert request.policy == f"hf:{BASE_NAME}" and request.options == {"adapter": str(adapter.resolve())}
    other = tmp_path / "run2" / "adapter"  # on a base nobody registered: listed with its path
    other.mkdir(parents=True)
    (other / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "base_model_name_or_path": str(tmp_path / "run2" / "base-model")}))
    add(str(other), data_dir=studio.controller.data_dir)
    dock.fill_local()
    items = [dock.local.itemText(i) for i in range(dock.local.count())]
    assert items[-1] == f"run2: adapter on {tmp_path / 'run2' / 'base-model'}", items
    dock.local.activated.emit(len(items) - 1)
    assert dock.model.text() == str(tmp_path / "run2" / "base-model")
    dock.policy.setCurrentText("oracle")
    dock.adapter.setText("")
