"""Demonstrations as the agent sees them: a person's episode that makes the same calls as an
oracle episode exports to the same TRL rows (system prompt, tools, start montage, results,
renders), and a kept start state (continue from here) is recorded so replay rebuilds it."""

from __future__ import annotations

import json

import pytest

TASK = "primitive_placement:2:3"
SAME = ("messages", "tools", "reward", "components", "success", "task", "task_family")


@pytest.fixture
def store(tmp_path):
    from agents.store import Store

    s = Store(tmp_path / "data", durable=False)
    yield s
    s.close()


def _human_episode(store, session, task) -> str:
    """The oracle's calls made by a person: through HumanTurns, as the studio records them."""
    from agents.loop.start_state import StartState, build_start_state
    from agents.loop.turns import HumanTurns

    start = build_start_state(session, task.setup)

    def begin(**meta):
        return store.begin_episode(task_id=task.id, task_params=task.parameters, source="human",
                                   **meta)

    turns = HumanTurns.begin(session, begin, task.prompt, StartState(tuple(start), keep=True))
    calls = []
    for c in task.oracle:
        r = turns.call(session, c["tool"], c["args"])
        calls.append({"tool": r.tool, "args": c["args"], "ok": r.ok,
                      "error_kind": r.error.kind.value if r.error else None, "seq": r.seq})
    verdict = task.evaluate(session, calls)
    turns.recorder.finish(reward=verdict.total, components=verdict.components,
                          success=verdict.success, final_message="Done.")
    return turns.recorder.episode_id


def test_a_persons_episode_exports_the_rows_of_the_oracle_episode(store, session, tmp_path):
    import pyarrow.parquet as pq

    from agents.store.export import export_parquet
    from training import make_policy
    from training.eval import oracle  # noqa: F401  (registers the oracle)
    from training.eval.harness import run_spec, task_spec
    from training.tasks import get_task

    task = get_task(TASK)
    record = run_spec(task_spec(TASK), make_policy("oracle"), session, store=store,
                      source="oracle")
    assert record["success"], record
    human_id = _human_episode(store, session, task)
    export_parquet(store, tmp_path / "out")
    rows = {r["source"]: r for r in pq.read_table(tmp_path / "out" / "episodes.parquet").to_pylist()}
    agent, human = rows["oracle"], rows["human"]
    assert json.loads(human["meta"])["id"] == human_id
    for key in SAME:
        assert human[key] == agent[key], key
    assert [i["bytes"] for i in human["images"]] == [i["bytes"] for i in agent["images"]]
    assert len(human["images"]) == len(task.oracle) + 1  # the start montage and every step's
    roles = [m["role"] for m in human["messages"]]
    assert roles[:2] == ["system", "user"] and roles.count("assistant") == len(task.oracle) + 1
    steps = store.steps(human_id)
    assert {s.actor for s in steps} == {"human"}
    assert {s.actor for s in store.steps(json.loads(agent["meta"])["id"])} == {"agent"}


def test_an_episode_kept_from_the_current_scene_replays_from_its_recorded_start(store, session):
    """Continue from here, headless: the loop starts from the scene as it is (no reset),
    records the calls that built it, and replay rebuilds it with every hash matching."""
    from agents.loop.episode_loop import EpisodeLoop, StartState
    from agents.policies.simple import PlanPolicy, calls_from_plan
    from agents.store.replay import replay_episode

    session.reset()
    made = [{"tool": "add_primitive", "args": {"kind": "cube", "name": "Base",
                                               "dimensions": [1, 1, 1], "location": [0, 0, 0.5]}},
            {"tool": "cad_box", "args": {"name": "Plate", "length": 100, "width": 70, "height": 10}}]
    for c in made:
        assert session.call(c["tool"], c["args"]).ok
    before = session.scene_hash()
    policy = PlanPolicy(name="script")
    policy.load(calls_from_plan([{"tool": "add_primitive", "args": {
        "kind": "cylinder", "name": "Handle", "dimensions": [0.1, 0.1, 0.4],
        "location": [0, 0, 1.2]}}], id_prefix="p"))

    def begin(**meta):
        return store.begin_episode(source="agent", **meta)

    loop = EpisodeLoop(policy, session, "add a handle on top", setup=StartState(tuple(made), keep=True),
                       recorder_factory=begin)
    result = loop.run()
    assert result.status == "done"
    names = [o["name"] for o in session.scene()["objects"]]
    assert names == ["Base", "Handle", "Plate"]  # the hand-made model is still there
    episode = store.episode(result.episode_id)
    assert episode.setup == made and episode.initial_scene_hash == before
    report = replay_episode(store, episode.id, session_factory=lambda: _Borrowed(session))
    assert report.matched, report.summary()
    assert report.steps_checked == episode.n_steps == 1
    # eval from the recorded start: the same loop, the start rebuilt from an empty scene
    session.reset()
    policy.load(calls_from_plan([], id_prefix="p"))
    again = EpisodeLoop(policy, session, "look", setup=StartState.of_episode(episode),
                        recorder_factory=begin).run()
    rerun = store.episode(again.episode_id)
    assert rerun.initial_scene_hash == before and rerun.setup == made


class _Borrowed:
    """The test's session as a context manager replay can use (not closed on exit)."""

    def __init__(self, session) -> None:
        self.session = session

    def __enter__(self):
        return self.session

    def __exit__(self, *exc) -> None:
        pass


def test_a_store_from_before_actors_marks_its_human_steps_human(tmp_path, monkeypatch):
    """Migration 2 on an existing store: steps get an actor, a person's episodes `human`."""
    from agents.store import Store, schema

    first = schema.MIGRATIONS[:1]
    with monkeypatch.context() as m:
        m.setattr(schema, "MIGRATIONS", first)
        m.setattr(schema, "LATEST_VERSION", 1)
        with Store(tmp_path, durable=False) as old:
            ids = {}
            for source in ("human", "agent"):
                rec = old.begin_episode(source=source, prompt="p")
                old._conn.execute(  # a v1 row, written as that version wrote it
                    "INSERT INTO steps (episode_id, idx, turn, at, tool, args) "
                    "VALUES (?, 0, 0, 0, 'get_scene', '{}')", (rec.episode_id,))
                old._conn.commit()
                rec.abort("test")
                ids[source] = rec.episode_id
    with Store(tmp_path, durable=False) as store:
        assert [s.actor for s in store.steps(ids["human"])] == ["human"]
        assert [s.actor for s in store.steps(ids["agent"])] == ["agent"]
