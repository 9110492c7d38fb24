"""Episodes recorded by the real producers — `modelwright run` and `evaluate` with two
workers, the oracle policy on real tasks — carry every field, and replay hash for hash."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from agents.store import EpisodeFilter, Store
from agents.store.replay import replay_episode
from studio.cli import build_app


def test_run_records_every_field_and_replays(tmp_path):
    out = CliRunner().invoke(build_app(), ["run", "--task", "scene_editing:1:3", "--policy",
                                           "oracle", "--data-dir", str(tmp_path), "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output.strip().splitlines()[-1])
    with Store(tmp_path) as store:
        ep = store.episode(summary["episode_id"])
        steps = store.steps(ep.id)
        assert (ep.status, ep.source, ep.policy, ep.task_family, ep.task_level, ep.task_seed) == (
            "finished", "oracle", "oracle", "scene_editing", 1, 3)
        assert ep.task_params and ep.system and ep.prompt and ep.final_message
        assert ep.setup and ep.initial_scene_hash and store.initial_frame(ep)
        assert ep.success is True and ep.reward == summary["reward"]
        assert ep.components == summary["components"] and "validity" in ep.components
        assert {t["name"] for t in store.tool_specs(ep.tools_version)} >= {"add_primitive", "cad_box"}
        assert set(ep.versions) == {"app", "blender", "cadquery", "python"}
        assert ep.n_steps == len(steps) == summary["calls"] >= 1
        for s in steps:
            assert s.ok and s.scene_hash and s.result_text and s.duration_ms > 0
        assert store.step_frame(steps[-1]) is not None
        report = replay_episode(store, ep.id)
        assert report.matched and report.steps_checked == len(steps), report.summary()


def test_eval_with_two_workers_records_every_episode(tmp_path):
    from training import make_policy
    from training.eval.harness import evaluate, task_spec
    from training.tasks import split_ids

    # Families without a uv_sphere: its scene hash is not reproducible yet (the runtime hashes
    # loop order, which bmesh's create_uvsphere varies run to run). Not cad_parts: its reference
    # parts are built in the eval threads and CadQuery's selector parser (pyparsing) is not
    # thread-safe. Both are reported to their owners.
    ids = split_ids("train", per_family=2, families=["scene_editing", "booleans"])
    with Store(tmp_path) as store:
        report = evaluate([task_spec(i) for i in ids], lambda: make_policy("oracle"), workers=2,
                          store=store, source="oracle")
        episodes = store.list_episodes(EpisodeFilter(source="oracle"))
        assert sorted(e.task_id for e in episodes) == sorted(ids)
        assert all(e.status == "finished" and e.n_steps >= 1 for e in episodes)
        assert all(e.success is not None and e.reward is not None for e in episodes)
        assert len(report["episodes"]) == len(ids)
        for e in episodes:
            steps = store.steps(e.id)
            assert [s.index for s in steps] == list(range(e.n_steps))
            assert all(store.step_frame(s) is not None for s in steps if s.frame)
        assert store.integrity_check() == "ok"
        for e in episodes:
            report = replay_episode(store, e.id)
            assert report.matched and report.steps_checked == e.n_steps, report.summary()
