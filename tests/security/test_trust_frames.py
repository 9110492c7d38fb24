"""A render that is not what it claims fails that call, never the run.

A worker runs the policy's code, so the bytes of its renders are a hostile party's data. The
supervisor checks every tool call's images where the reply is received
(`tools.trust.replies.check_images`): the count the call makes, each a PNG of the size it draws, no
larger than such a PNG stored raw, decoding whole. One that fails is a bad reply: the call
fails with a one-line `crash`, the worker is restored, the ledger records the call as
crashed. So `tasks try` prints its reward, `eval` and GRPO rollouts score the episode exactly
as the honest twin whose render failed (a refused one), and the store records the episode.
"""

from __future__ import annotations

import io
import json
import struct
import zlib

import pytest
from typer.testing import CliRunner

from agents.loop.config import LoopConfig
from agents.policies.simple import PlanPolicy, calls_from_plan
from tools import ToolSession, WorkerPool
from tools.errors import ErrorKind
from tools.trust import images
from training.eval.harness import episode_scheduler, run_spec, task_spec
from training.rl.rollouts import run_groups
from training.tasks import get_task

TASK = "primitive_placement:1:42"
RUNTIME = ("import gc\n"
           "rt = [o for o in gc.get_objects() if type(o).__name__ == 'WorkerRuntime'][0]\n")


def _png(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (40, 50, 60)).save(out, "PNG")
    return out.getvalue()


def _lying(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height but whose pixel data is a few garbage bytes."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (images.PNG_SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 9))
            + chunk(b"IEND", b""))


# what a hostile render answers for the default montage (2 x 2 views of 256: 512 x 512)
FORGED = {
    "not a PNG": [b"GIF89a not a png at all"],
    "header lies": [_lying(512, 512)],
    "wrong size": [_png(64, 64)],
    "too big": f"[{_png(512, 512)!r} + bytes(5 << 20)]",  # made in the worker
    "wrong count": [_png(512, 512), _png(512, 512)],
    "none": [],
}


def _patch(blobs: list[bytes] | str) -> str:
    """Python that makes the worker's render answer `blobs` (a list, or the Python that makes
    it); its output says one montage."""
    made = blobs if isinstance(blobs, str) else repr(blobs)
    return RUNTIME + (f"BLOBS = {made}\n"
                      "rt.handlers['render'] = lambda a: ({'views': ['iso'], 'size': 256, "
                      "'image_size': [512, 512], 'images': len(BLOBS)}, list(BLOBS))\n")


@pytest.fixture(scope="module")
def hostile_pool():
    pool = WorkerPool(size=1, test_hooks=True)
    yield pool
    pool.close()


def _exec(session, code: str) -> None:
    reply, _, err = session._send({"op": "exec", "code": code}, 60, "exec")
    assert err is None and reply.get("ok"), (err, reply)


@pytest.mark.parametrize("kind", list(FORGED))
def test_a_forged_render_is_a_failed_call_and_the_session_goes_on(kind, hostile_pool):
    with ToolSession(hostile_pool) as s:
        assert s.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}).ok
        honest = s.render()
        assert honest.ok and images.png_size(honest.images[0]) == (512, 512)
        _exec(s, _patch(FORGED[kind]))
        forged = s.render()
        assert not forged.ok and forged.images == []
        assert forged.error.kind == ErrorKind.CRASH and "bad reply" in forged.error.message
        assert "\n" not in forged.error.message
        assert [e.outcome for e in s.ledger.snapshot()[1]][-1] == "crash"
        after = s.render()  # restored from its last commit: the scene is there, honest again
        assert after.ok and after.images[0] == honest.images[0]
        assert [o["name"] for o in s.scene()["objects"]] == ["A"]


def test_real_renders_of_every_shape_pass_the_check(worker_pool):
    """The check holds each render to the size the call draws: every layout a worker makes."""
    cases = [({}, [(512, 512)]), ({"views": ["iso", "top", "front"], "tiled": False, "size": 64},
             [(64, 64)] * 3), ({"views": ["iso", "top", "front", "left", "right"], "size": 48},
             [(144, 96)]), ({"camera": {"location": [3, 3, 3], "target": [0, 0, 0],
                                        "lens_mm": 50}, "size": 40}, [(40, 40)]),
             ({"views": ["top"], "size": 33}, [(33, 33)])]
    with ToolSession(worker_pool) as s:
        for args, sizes in cases:
            r = s.call("render", args)
            assert r.ok, (args, r.error)
            assert [images.png_size(b) for b in r.images] == sizes


# -- the paths that score episodes -------------------------------------------------------------
def hostile(probe: str) -> str:
    return ("import dataclasses\nimp = dataclasses.sys.modules['importlib'].import_module\n"
            "bi = imp('builtins')\n"
            f"bi.exec({probe!r}, {{'__builtins__': bi}})\n"
            "result = cq.Workplane().box(1, 1, 1)\n")


BENIGN = "result = cq.Workplane().box(1, 1, 1)\n"
RENDER = {"tool": "render", "args": {}}
REFUSED_RENDER = {"tool": "render", "args": {"size": 8}}  # fails honestly: refused


def script(code: str) -> dict:
    return {"tool": "cadquery_script", "args": {"code": code, "name": "Dust"}}


def plans() -> tuple[list[dict], list[dict]]:
    oracle = [dict(c) for c in get_task(TASK).oracle]
    forged = [script(hostile(_patch([b"not a png"]))), RENDER, *oracle]
    honest = [script(BENIGN), REFUSED_RENDER, *oracle]
    return forged, honest


def _via_try(plan, tmp_path, tag):
    from studio.cli import build_app

    path = tmp_path / f"{tag}.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in plan))
    res = CliRunner().invoke(build_app(), ["tasks", "try", TASK, "--calls", str(path), "--json",
                                           "--out", str(tmp_path / tag)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])
    assert (tmp_path / tag / "reward.json").is_file()
    errors = [(e["tool"], e.get("error_kind"), e.get("error") or "") for e in out["errors"]]
    return (out["reward"], out["success"], out["components"]), errors


def _failed(result) -> list[tuple]:
    """The failed calls of a loop episode as the model saw them: tool, kind, message."""
    return [(o.call.name, o.error_kind, o.error_message or "")
            for step in result.steps for o in step.calls if not o.ok]


def _via_eval(plan, worker_pool, store=None):
    with ToolSession(worker_pool) as s:
        record = run_spec(task_spec(TASK), PlanPolicy(calls_from_plan(plan)), s, store=store,
                          config=LoopConfig(max_steps=len(plan) + 2, observe="never"))
    result = record["_result"]
    assert result.status != "error" and not record.get("error"), record
    v = result.verdict
    errors = _failed(result)
    return (v.total, v.success, v.components), errors


def _via_rollout(plan, worker_pool):
    with episode_scheduler(1, lambda: ToolSession(worker_pool)) as scheduler:
        [[rollout]] = run_groups(scheduler, [(0, TASK)], 1,
                                 lambda seed, greedy=False: PlanPolicy(calls_from_plan(plan)),
                                 LoopConfig(max_steps=len(plan) + 2, observe="never"))
    v = rollout.result.verdict
    errors = _failed(rollout.result)
    return (v.total, v.success, v.components), errors


@pytest.mark.parametrize("path", ["try", "eval", "rollout"])
def test_a_forged_render_scores_as_the_honest_twin_whose_render_failed(path, worker_pool,
                                                                      tmp_path):
    forged_plan, honest_plan = plans()
    run = {"try": lambda p, t: _via_try(p, tmp_path, t),
           "eval": lambda p, t: _via_eval(p, worker_pool),
           "rollout": lambda p, t: _via_rollout(p, worker_pool)}[path]
    forged, forged_errors = run(forged_plan, "forged")
    honest, honest_errors = run(honest_plan, "honest")
    # control: the hostile bytes reached the trusted side, which refused them
    [(tool, kind, message)] = forged_errors
    assert (tool, kind) == ("render", "crash") and "not a PNG" in message
    assert [(t, k) for t, k, _ in honest_errors] == [("render", "validation")]
    assert forged == honest
    assert forged[0] != 0.0 and forged[0] > -1.0 and forged[2]["validity"] < 1.0


def test_a_forged_montage_is_recorded_and_the_episode_scores_honestly(worker_pool, tmp_path):
    """The loop's own montage (observe: after each change) meets the forged render: the
    observation is missing for that turn, the store records the episode, the reward is the
    honest one (observations are not scored)."""
    from agents.store import Store

    oracle = [dict(c) for c in get_task(TASK).oracle]
    store = Store(tmp_path / "data", durable=False)
    rewards, ids = {}, {}
    for tag, code in (("forged", hostile(_patch([b"not a png"]))), ("honest", BENIGN)):
        with ToolSession(worker_pool) as s:
            record = run_spec(task_spec(TASK), PlanPolicy(calls_from_plan([script(code), *oracle])),
                              s, store=store, config=LoopConfig(max_steps=len(oracle) + 3))
        result = record["_result"]
        assert result.status != "error" and not record.get("error"), record
        rewards[tag] = (result.verdict.total, result.verdict.success, result.verdict.components)
        ids[tag] = result.episode_id
    assert rewards["forged"] == rewards["honest"] and rewards["honest"][0] > 0.0
    forged_steps = store.steps(ids["forged"])
    honest_steps = store.steps(ids["honest"])
    assert store.episode(ids["forged"]).status == "finished"
    assert [s.ok for s in forged_steps] == [s.ok for s in honest_steps]
    # control: the montage after the script is missing where the worker forged it
    assert forged_steps[0].frame is None and honest_steps[0].frame is not None
    assert all(store.step_frame(s)[:4] == b"\x89PNG" for s in forged_steps if s.frame)
