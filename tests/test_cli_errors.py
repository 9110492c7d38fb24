"""Every `modelwright` command answers a user's mistake like a good Unix tool: one line on
stderr that names the thing and says what to do, the documented exit code (tools/cli/exits.py:
1 the work failed, 2 bad usage or input, 3 unavailable), and never a traceback.

The commands are enumerated from the assembled app, so a new one is covered: each gets an
unknown option, and each that takes a file, a folder or an id must have bad-input cases here.
"""

from __future__ import annotations

import io
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from PIL import Image
from typer.testing import CliRunner

from studio.cli import build_app
from tools.cli.exits import ExitCode

REPO = Path(__file__).resolve().parents[1]
FAILED, USAGE, UNAVAILABLE = ExitCode.FAILED, ExitCode.USAGE, ExitCode.UNAVAILABLE


def _commands(cmd=None, path=()) -> dict[tuple[str, ...], object]:
    """Every runnable command of the app by its path (a group that runs itself counts)."""
    cmd = cmd or typer.main.get_command(build_app())
    found = {}
    subs = getattr(cmd, "commands", None)
    if subs is None or getattr(cmd, "invoke_without_command", False):
        found[path] = cmd  # the root too: bare `modelwright` opens the studio
    for name, sub in (subs or {}).items():
        found |= _commands(sub, (*path, name))
    return found


def _closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound, then released: refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (0, 90, 0)).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def bad(tmp_path_factory) -> dict[str, str]:
    """Files and folders a user gets wrong, and one good store to point at."""
    from agents.store import Store

    root = tmp_path_factory.mktemp("bad-inputs")
    (root / "bad.yaml").write_text("kind: sft\nmodel: {path: x}\nrun: [a, b\n  c: d\n")
    (root / "bad.jsonl").write_text('{"tool": "get_scene"}\n{not json}\n')
    (root / "fails.jsonl").write_text('{"tool": "transform", "args": {"name": "nope"}}\n')
    (root / "bad.parquet").write_text("not parquet\n")
    (root / "bad.step").write_text("ISO-10303-21; nonsense\n")
    (root / "not-a-model").mkdir()
    (root / "bad.json").write_text("{bad\n")
    for name, manifest in (("export-bad-json", "{bad\n"),
                           ("export-bad-parquet", '{"format": "modelwright-trajectories"}')):
        (root / name).mkdir()
        (root / name / "manifest.json").write_text(manifest)
        for table in ("episodes", "steps"):
            (root / name / f"{table}.parquet").write_text("not parquet\n")
    store = root / "store"
    with Store(store) as s:
        rec = s.begin_episode(task_id="primitive_placement:1:0", source="oracle", prompt="p",
                              initial_frame=_png())
        rec.add_step(tool="add_primitive", args={"kind": "cube"}, result={"name": "Cube"},
                     frame=_png(), scene_hash="h")
        rec.finish(reward=1.0, success=True)
    configs = {
        "nomodel": "kind: sft\nmodel: {path: ./no/such/model}\nsft: {data: [x.parquet]}\n",
        "nodata": f"kind: sft\nmodel: {{path: {root / 'tiny'}}}\n"
                  f"sft: {{data: [{root / 'exports' / 'episodes.parquet'}]}}\n",
        "baddata": f"kind: sft\nmodel: {{path: {root / 'tiny'}}}\n"
                   f"sft: {{data: [{root / 'bad.parquet'}]}}\n",
        "grpo_nomodel": "kind: grpo\nmodel: {path: /no/such/model}\n"
                        "grpo: {tasks: {families: [primitive_placement], levels: [1]}}\n",
        "grpo_tiny": f"kind: grpo\nmodel: {{path: {root / 'tiny'}}}\n"
                     "grpo: {tasks: {families: [primitive_placement], levels: [1]}}\n",
    }
    for name, text in configs.items():
        (root / f"{name}.yaml").write_text(text)
    from training.sft.tiny_model import build_tiny_model

    build_tiny_model(root / "tiny", seed=0)
    return {"root": str(root), "store": str(store), "port": str(_closed_port())}


# (command path, args, exit code, words the one line must hold). `{root}`, `{store}` and
# `{port}` are filled from the fixture.
CASES = [
    (("tools", "run"), ["{root}/missing.jsonl", "--out", "{root}/o1"], USAGE, ["missing.jsonl", "no such file"]),
    (("tools", "run"), ["{root}/bad.jsonl", "--out", "{root}/o2"], USAGE, ["bad.jsonl:2", "not JSON"]),
    (("tools", "run"), ["{root}/fails.jsonl", "--out", "{root}/o3"], FAILED, ["fails.jsonl:1", "transform", "validation", "--keep-going"]),
    (("tasks", "show"), ["nope:1:1"], USAGE, ["'nope'", "known:"]),
    (("tasks", "show"), ["cad_parts"], USAGE, ["family:level:seed"]),
    (("tasks", "try"), ["nope:1:1", "--none"], USAGE, ["'nope'", "known:"]),
    (("tasks", "try"), ["primitive_placement:1:0"], USAGE, ["choose exactly one of"]),
    (("tasks", "try"), ["primitive_placement:1:0", "--calls", "{root}/missing.jsonl"], USAGE, ["missing.jsonl", "no such file"]),
    (("tasks", "verify"), ["--seeds", "x"], USAGE, ["--seeds", "integer"]),
    (("tasks", "verify"), ["--family", "nope"], USAGE, ["'nope'", "known:"]),
    (("tasks", "verify"), ["--jobs", "0"], USAGE, ["--jobs", "at least 1"]),
    (("tasks", "cards"), ["--family", "nope"], USAGE, ["'nope'", "known:"]),
    (("tasks", "cards"), ["--family", "rooms", "--out", "{root}/bad.jsonl/x"], USAGE, ["bad.jsonl/x", "output folder"]),
    (("score",), ["{root}/missing.stl", "{root}/bad.step"], USAGE, ["missing.stl"]),
    (("score",), ["{root}/bad.step", "{root}/bad.step"], USAGE, ["bad.step"]),
    (("run",), ["--task", "nope:1:1"], USAGE, ["'nope'", "known:"]),
    (("run",), ["--task", "primitive_placement:1:0", "--policy", "bogus"], USAGE, ["'bogus'", "choose one of"]),
    (("run",), ["--task", "primitive_placement:1:0", "--policy", "hf", "--model", "{root}/no-model"], USAGE, ["no-model", "models list"]),
    (("run",), ["--task", "primitive_placement:1:0", "--policy", "openai", "--model", "m", "--no-record",
                "--base-url", "http://127.0.0.1:{port}/v1", "--timeout", "5"], UNAVAILABLE, ["127.0.0.1:{port}", "--base-url"]),
    (("eval",), [], USAGE, ["--policy is required"]),
    (("eval",), ["--policy", "oracle", "--families", "nope"], USAGE, ["nope", "known"]),
    (("eval",), ["--compare", "{root}/old.json", "{root}/new.json"], USAGE, ["old.json", "modelwright eval --json"]),
    (("eval",), ["--compare", "{root}/bad.json", "{root}/bad.json"], USAGE, ["bad.json", "not an eval report"]),
    (("train", "sft"), ["--config", "{root}/missing.yaml"], USAGE, ["missing.yaml", "does not exist"]),
    (("train", "sft"), ["--config", "{root}/bad.yaml"], USAGE, ["bad.yaml:4:4", "not valid YAML"]),
    (("train", "sft"), ["--config", "{root}/nomodel.yaml"], USAGE, ["model.path", "no/such/model", "build_tiny", "models list", "hub id"]),
    (("train", "sft"), ["--config", "{root}/nodata.yaml", "--out", "{root}/r1"], USAGE, ["episodes.parquet", "modelwright data export --out"]),
    (("train", "sft"), ["--config", "{root}/baddata.yaml", "--out", "{root}/r2"], USAGE, ["bad.parquet", "not a Parquet file"]),
    (("train", "grpo"), ["--config", "{root}/nodata.yaml"], USAGE, ["'sft' config", "modelwright train sft"]),
    (("train", "grpo"), ["--config", "{root}/grpo_nomodel.yaml"], USAGE, ["model.path", "/no/such/model", "models list"]),
    (("train", "grpo"), ["--config", "{root}/grpo_tiny.yaml", "--adapter", "{root}/no-adapter"], USAGE, ["no-adapter", "adapter_config.json"]),
    (("train", "pipeline"), ["--config", "{root}/bad.yaml"], USAGE, ["bad.yaml:4:4"]),
    (("train", "launch"), ["--config", "{root}/bad.yaml"], USAGE, ["bad.yaml:4:4"]),
    (("serve",), ["--model", "{root}/no-model", "--dry-run"], USAGE, ["no-model", "models list"]),
    (("serve",), ["--model", "{root}/not-a-model", "--dry-run"], USAGE, ["not-a-model", "config.json"]),
    (("serve",), ["--model", "Qwen/Qwen3-8B", "--adapter", "a={root}", "--dry-run"], USAGE, ["adapter_config.json"]),
    (("serve", "load-adapter"), ["a", "{root}/no-adapter"], USAGE, ["no-adapter", "adapter_config.json"]),
    (("serve", "load-adapter"), ["a", "{root}/ad", "--no-check-path", "--base-url", "http://127.0.0.1:{port}"], UNAVAILABLE, ["127.0.0.1:{port}"]),
    (("data", "list"), ["--data-dir", "{store}", "--source", "bogus"], USAGE, ["--source", "'bogus'"]),
    (("data", "list"), ["--data-dir", "{root}/no-store"], USAGE, ["no-store", "does not exist", "--data-dir"]),
    (("data", "show"), ["nope", "--data-dir", "{store}"], USAGE, ["'nope'", "data list"]),
    (("data", "show"), ["nope", "--data-dir", "{root}/no-store"], USAGE, ["no-store", "--data-dir"]),
    (("data", "export"), ["--out", "{root}/x", "--data-dir", "{root}/no-store"], USAGE, ["no-store", "--data-dir"]),
    (("data", "export"), ["--out", "{root}/x", "--format", "trl", "--data-dir", "{store}"], USAGE, ["--format", "parquet"]),
    (("data", "replay"), ["nope", "--data-dir", "{store}"], USAGE, ["'nope'", "data list"]),
    (("data", "import"), ["{root}/not-a-model", "--data-dir", "{store}"], USAGE, ["not-a-model"]),
    (("data", "import"), ["{root}/export-bad-json", "--data-dir", "{store}"], USAGE, ["manifest.json", "not valid JSON"]),
    (("data", "import"), ["{root}/export-bad-parquet", "--data-dir", "{store}"], USAGE, ["export-bad-parquet", "cannot read"]),
    (("data", "delete"), ["nope", "--yes", "--data-dir", "{store}"], USAGE, ["'nope'", "data list"]),
    (("data", "doctor"), ["--data-dir", "{root}/no-store"], USAGE, ["no-store", "no store", "--data-dir"]),
    (("models", "list"), ["--data-dir", "{root}/bad.yaml"], USAGE, ["bad.yaml", "--data-dir"]),
    (("models", "add"), ["{root}/not-a-model", "--data-dir", "{root}/mdata"], USAGE, ["not-a-model", "config.json"]),
    (("models", "add"), ["{root}/bad.json", "--data-dir", "{root}/mdata"], USAGE, ["bad.json", "not a GGUF file"]),
    (("models", "show"), ["nope", "--data-dir", "{root}/mdata"], USAGE, ["'nope'", "models list"]),
    (("models", "remove"), ["nope", "--data-dir", "{root}/mdata"], USAGE, ["'nope'", "models list"]),
    (("models", "export"), ["nope", "--data-dir", "{root}/mdata"], USAGE, ["'nope'", "models list"]),
    (("models", "export"), ["--quant", "q3", "--data-dir", "{root}/mdata"], USAGE, ["--quant", "'q3'", "q8_0"]),
    (("models", "export"), ["--format", "onnx", "--data-dir", "{root}/mdata"], USAGE, ["--format", "'onnx'", "gguf"]),
    (("studio",), ["--task", "nope:1:1"], USAGE, ["'nope'", "known:"]),
    (("studio",), ["--autorun"], USAGE, ["--autorun", "--task"]),
    (("studio",), ["--theme", "purple"], USAGE, ["--theme", "'purple'", "dark or light"]),
    (("studio",), ["--recover", "maybe"], USAGE, ["--recover", "'maybe'", "ask, yes, no"]),
    (("studio",), ["--recover", "yes", "--task", "primitive_placement:1:0"], USAGE, ["--recover yes", "--task"]),
    (("envs", "serve"), ["--families", "nope"], USAGE, ["'nope'", "known:"]),
    (("envs", "serve"), ["--levels", "1,x"], USAGE, ["--levels", "1 to 5"]),
]
# Commands with no file, folder or id to get wrong (flags only, or a stdio server).
NOTHING_TO_GET_WRONG = {("tools", "list"), ("tools", "stress"), ("tasks", "list"), ("mcp",)}


def _fill(text: str, bad: dict[str, str]) -> str:
    return text.format(**bad)


def _invoke(args: list[str], env: dict | None = None):
    return CliRunner().invoke(build_app(), args, env={"HF_HUB_OFFLINE": "1", **(env or {})})


def _assert_one_line_error(result, code: int, words: list[str]) -> None:
    shown = f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"an exception reached the user: {result.exception!r}\n{shown}")
    assert "Traceback" not in result.output, shown
    assert result.exit_code == code, shown
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), shown
    for word in words:
        assert word in lines[0], (word, shown)


def test_every_command_with_something_to_get_wrong_has_bad_input_cases():
    covered = {path for path, *_ in CASES}
    for path, cmd in _commands().items():
        if path in NOTHING_TO_GET_WRONG:
            continue
        takes_input = any(p.required or _is_path(p) or p.name in ("data_dir", "model")
                          for p in cmd.params)
        assert not takes_input or path in covered, (
            f"`modelwright {' '.join(path)}` takes input: add its bad-input cases to CASES")


def _is_path(param) -> bool:
    described = getattr(param, "type_descriptor", None)  # typer's own click
    annotation = getattr(described, "annotation", None) or getattr(param, "type", None)
    return "path" in str(annotation).lower()


@pytest.mark.parametrize("path", sorted(_commands()), ids=lambda p: " ".join(p) or "root")
def test_an_unknown_option_is_one_line_and_exit_2(path):
    result = _invoke([*path, "--no-such-option"])
    _assert_one_line_error(result, USAGE, ["--no-such-option", "--help"])


@pytest.mark.parametrize(("path", "args", "code", "words"), CASES,
                         ids=[f"{' '.join(c[0])}-{i}" for i, c in enumerate(CASES)])
def test_bad_input_is_one_line_naming_the_thing_and_the_documented_code(bad, path, args, code,
                                                                         words):
    result = _invoke([*path, *(_fill(a, bad) for a in args)])
    _assert_one_line_error(result, code, [_fill(w, bad) for w in words])


def test_the_advice_for_missing_training_data_is_a_command_that_works(bad, tmp_path):
    root = Path(bad["root"])
    result = _invoke(["train", "sft", "--config", str(root / "nodata.yaml"), "--out",
                      str(tmp_path / "run")])
    advice = result.stderr.split("`")[1]  # the command between backticks
    assert advice.startswith("modelwright data export --out ")
    done = _invoke([*advice.split()[1:], "--data-dir", bad["store"]])
    assert done.exit_code == 0, done.output
    from training.sft.data import load_conversations

    assert len(load_conversations(root / "exports" / "episodes.parquet")) == 1


def test_a_hub_id_goes_to_the_hub_with_a_short_timeout_and_a_clear_message(bad, tmp_path):
    """Only a name shaped org/name that is no path reaches for the hub; an unreachable hub
    (here a closed port on loopback) is one line and exit 3, not minutes of retries."""
    root = Path(bad["root"])
    export = _invoke(["data", "export", "--out", str(tmp_path / "ex"), "--data-dir", bad["store"]])
    assert export.exit_code == 0, export.output
    cfg = tmp_path / "hub.yaml"
    cfg.write_text("kind: sft\nmodel: {path: nosuch-org/nosuch-model}\n"
                   f"sft: {{data: [{tmp_path / 'ex' / 'episodes.parquet'}], max_steps: 1}}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_ENDPOINT": f"http://127.0.0.1:{bad['port']}",
           "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf-home")}
    p = subprocess.run([sys.executable, "-m", "studio.cli", "train", "sft", "--config", str(cfg),
                        "--out", str(tmp_path / "run")], capture_output=True, text=True,
                       env=env, cwd=root, timeout=300)
    assert p.returncode == UNAVAILABLE and "Traceback" not in p.stderr, p.stderr
    assert "Retrying" not in p.stderr  # asked once: the hub client retries for ~30 s a file
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot reach the model hub at http://127.0.0.1:{bad['port']}"
                           " for nosuch-org/nosuch-model"), line
    assert "download it and pass its folder" in line


def test_the_real_entry_point_prints_no_traceback(bad):
    """The same handler in a real process (`python -m studio.cli`), not only in CliRunner."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "studio.cli", "tasks", "show", "nope:1:1"],
                       capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert p.returncode == USAGE and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_studio_exit_when_done_with_no_display_and_nothing_to_run_exits_at_once(tmp_path):
    """It used to wait forever for a run that never starts in a window nobody can close."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env |= {"PYTHONPATH": str(REPO), "MODELWRIGHT_DATA_DIR": str(tmp_path / "data")}
    p = subprocess.run([sys.executable, "-m", "studio.cli", "studio", "--exit-when-done",
                        "--settings", str(tmp_path / "s.ini")], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=120)
    assert p.returncode == USAGE and "Traceback" not in p.stderr, p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert "--exit-when-done" in line and "--task" in line and "xvfb-run" in line, line
    assert not (tmp_path / "data").exists()  # nothing started, nothing recorded


def test_make_run_records_into_modelwright_data_dir(tmp_path):
    stand_in = tmp_path / "modelwright"
    stand_in.write_text("#!/bin/sh\necho \"$@\"\n")
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env |= {"MODELWRIGHT_BIN": str(stand_in), "MODELWRIGHT_RUN_OUT": str(tmp_path / "out")}
    env.pop("MODELWRIGHT_DATA_DIR", None)
    for run_env, expected in ((env | {"MODELWRIGHT_DATA_DIR": str(tmp_path / "mine")},
                               tmp_path / "mine"), (env, tmp_path / "out" / "data")):
        p = subprocess.run(["bash", str(REPO / "scripts" / "run.sh")], capture_output=True,
                           text=True, env=run_env, timeout=60)
        assert p.returncode == 0, p.stderr
        args = (tmp_path / "out" / "summary.json").read_text().split()
        assert args[args.index("--data-dir") + 1] == str(expected)
        assert f"Episode recorded in:      {expected}" in p.stdout


def test_sigterm_stops_an_eval_in_one_line_and_keeps_its_episodes(tmp_path):
    """`kill` (or a job scheduler's stop) ends an eval as Ctrl-C does: the episodes recorded so
    far stay finished in the store, the last line says why it stopped, exit 130, no traceback."""
    import signal
    import sqlite3
    import time

    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "studio.cli", "eval", "--policy", "oracle",
                             "--families", "composition", "--per-family", "40",
                             "--data-dir", str(data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip

    def finished() -> int:
        try:
            with sqlite3.connect(f"file:{data / 'index.sqlite3'}?mode=ro", uri=True) as db:
                return db.execute("SELECT count(*) FROM episodes WHERE status = 'finished'"
                                  ).fetchone()[0]  # fmt: skip
        except sqlite3.Error:
            return 0

    try:
        while proc.poll() is None and finished() < 2:
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == ExitCode.INTERRUPTED, err[-3000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "stopped (SIGTERM)", err[-500:]
    with sqlite3.connect(data / "index.sqlite3") as db:
        statuses = dict(db.execute("SELECT status, count(*) FROM episodes GROUP BY status"))
    assert 2 <= statuses.pop("finished") < 40  # it stopped: not every episode ran
    assert set(statuses) <= {"interrupted"}, statuses  # the one under way, if any
