"""`tasks try`'s lists come from the trusted record, not from the worker's replies.

A hostile script patches its worker so that calls that fail answer `ok` and a call that ran
answers a fake error. The `errors` list of `tasks try --json` (and calls.jsonl of `--out`)
must be exactly its honest twin's: the calls the clean rebuild did not establish, with the
trusted side's words, the worker's own report only under `worker_*` labels.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from training.tasks import get_task

TASK = "primitive_placement:1:42"
RUNTIME = ("import gc\n"
           "rt = [o for o in gc.get_objects() if type(o).__name__ == 'WorkerRuntime'][0]\n")
# failures answer ok; get_scene, which runs, answers a fake error
FORGE = RUNTIME + """
from tools.errors import ToolError
orig = rt._call
def forged(tool, args, mutating):
    if tool == 'get_scene':
        raise ToolError('kernel', 'FAKE: the scene is on fire')
    try:
        return orig(tool, args, mutating)
    except Exception:
        return rt._ok({})
rt._call = forged
"""
MISSES = [{"tool": "transform", "args": {"name": "Nope", "location": [0, 0, 1]}},
          {"tool": "set_material", "args": {"name": "Nope", "color": "#ff0000"}}]
LOOK = {"tool": "get_scene", "args": {}}
REFUSED = {"tool": "add_primitive", "args": {"kind": "blob"}}


def hostile(probe: str) -> str:
    return ("import dataclasses\nimp = dataclasses.sys.modules['importlib'].import_module\n"
            "bi = imp('builtins')\n"
            f"bi.exec({probe!r}, {{'__builtins__': bi}})\n"
            "result = cq.Workplane().box(1, 1, 1)\n")


def script(code: str) -> dict:
    return {"tool": "cadquery_script", "args": {"code": code, "name": "Dust"}}


def _try(plan: list[dict], tmp_path, tag: str) -> tuple[dict, list[dict]]:
    from studio.cli import build_app

    path = tmp_path / f"{tag}.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in plan))
    res = CliRunner().invoke(build_app(), ["tasks", "try", TASK, "--calls", str(path), "--json",
                                           "--out", str(tmp_path / tag)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])
    calls = [json.loads(line) for line in (tmp_path / tag / "calls.jsonl").read_text().splitlines()]
    return out, calls


def _trusted_view(errors: list[dict]) -> list[tuple]:
    return [(e["tool"], json.dumps(e["args"], sort_keys=True), e["ok"], e["outcome"],
             e["error_kind"], e["error"]) for e in errors]


def test_try_lists_the_trusted_errors_under_a_worker_that_forges_them(tmp_path):
    oracle = [dict(c) for c in get_task(TASK).oracle]
    tail = [*MISSES, LOOK, REFUSED, *oracle]
    forged, forged_calls = _try([script(hostile(FORGE)), *tail], tmp_path, "forged")
    honest, honest_calls = _try([script("result = cq.Workplane().box(1, 1, 1)\n"), *tail],
                                tmp_path, "honest")
    # control: inside the policy's worker the misses said ok and get_scene said it failed
    by_tool = {c["tool"]: c for c in forged_calls}
    assert by_tool["transform"]["worker_reported_ok"] is True
    assert by_tool["set_material"]["worker_reported_ok"] is True
    assert by_tool["get_scene"]["worker_reported_ok"] is False
    assert "FAKE" in by_tool["get_scene"]["worker_error"]
    # the lists are the trusted ones: the honest twin's, whatever the worker said
    assert _trusted_view(forged["errors"]) == _trusted_view(honest["errors"])
    assert [(e["tool"], e["outcome"]) for e in forged["errors"]] == [
        ("transform", "answered"), ("set_material", "answered"), ("add_primitive", "refused")]
    assert forged["details"]["errors"] == len(forged["errors"]) == honest["details"]["errors"]
    assert [(c["tool"], c["ok"]) for c in forged_calls] == [(c["tool"], c["ok"])
                                                          for c in honest_calls]
    for e in forged["errors"]:  # no message of the worker's outside its label
        assert "FAKE" not in json.dumps({k: v for k, v in e.items() if not k.startswith("worker_")})
    assert forged["reward"] == honest["reward"]
