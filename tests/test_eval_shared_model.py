"""`modelwright eval --policy hf --workers N`: the in-process model is loaded once and shared
by every episode; with 2 workers each wave's greedy turns are one batch, or, where turns reuse
their KV cache (a float32 text model), run side by side on their own threads; either way the
results are those of one worker."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from studio.cli import build_app
from training.eval.harness import without_timing


def test_eval_workers_share_one_model_and_batch_its_turns(tmp_path, tiny_model_dir, monkeypatch):
    import agents.policies.hf_policy as hf

    loads = []
    real = hf.load_model

    def counted(config):  # the real loader, counted
        loads.append(config.model)
        return real(config)

    monkeypatch.setattr(hf, "load_model", counted)
    app, runner = build_app(), CliRunner()
    reports = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}.json"
        result = runner.invoke(app, [
            "eval", "--policy", "hf", "--model", str(tiny_model_dir), "--split", "validation",
            "--families", "primitive_placement", "--per-family", "2", "--workers", str(workers),
            "--max-steps", "1", "--max-tokens", "6", "--no-record", "--json", str(out),
        ], catch_exceptions=False)  # fmt: skip
        assert result.exit_code == 0, result.output
        reports[workers] = json.loads(out.read_text())
    assert loads == [str(tiny_model_dir)] * 2  # once per command, not once per episode
    one, two = reports[1], reports[2]
    assert one["overall"]["episodes"] == two["overall"]["episodes"] == 2
    assert "lockstep_batches" not in one and two["lockstep_batches"] == [2]  # one turn each
    assert without_timing(one) == without_timing(two)
    for report in (one, two):
        assert report["cpu"]["cpu_threads"] >= 1 and report["cpu"]["omp_wait_policy"]


def test_eval_workers_run_cache_reusing_turns_side_by_side(tmp_path, tiny_text_dir):
    from agents.models.cpu import usable_cores

    app, runner = build_app(), CliRunner()
    reports = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}.json"
        result = runner.invoke(app, [
            "eval", "--policy", "hf", "--model", str(tiny_text_dir), "--split", "validation",
            "--families", "primitive_placement,materials", "--per-family", "2",
            "--workers", str(workers), "--max-steps", "2", "--max-tokens", "8", "--no-record",
            "--json", str(out),
        ], catch_exceptions=False)  # fmt: skip
        assert result.exit_code == 0, result.output
        reports[workers] = json.loads(out.read_text())
    one, two = reports[1], reports[2]
    assert one["overall"]["episodes"] == two["overall"]["episodes"] == 4
    assert not one["cpu"]["turns_alongside"] and two["cpu"]["turns_alongside"]
    assert "lockstep_batches" not in two  # no batch: each turn its own, from its cache
    assert two["cpu"]["cpu_threads"] <= max(1, usable_cores() // 2)
    assert without_timing(one) == without_timing(two)


@pytest.mark.fast
def test_families_training_names_every_family_not_held_out():
    from training.cli.eval import eval_families
    from training.tasks import FAMILIES
    from training.tasks.base import held_out_families

    chosen, held = eval_families("training"), set(held_out_families())
    assert len(held) == 5 and len(chosen) == len(FAMILIES) - 5
    assert not set(chosen) & held and set(chosen) | held == set(FAMILIES)
    assert eval_families("materials, cad_parts") == ["materials", "cad_parts"]
    assert eval_families(None) is None
