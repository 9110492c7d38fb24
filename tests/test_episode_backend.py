"""The episode backend seam (training/eval/requests.py, backend.py): requests are data, the
local backend records under the id the head fixed, a buffered episode commits once however
often it is delivered, and nothing on the local path imports Ray."""

from __future__ import annotations

import pickle
import subprocess
import sys

from agents import LoopConfig
from agents.store import Store
from agents.store.buffer import BufferSink, commit
from training.eval.requests import EpisodeRequest, PolicySpec, run_request

TASK = "primitive_placement:1:110003"


def test_a_buffered_episode_commits_once_under_the_heads_id(session, tmp_path) -> None:
    request = EpisodeRequest(TASK, seed=1, policy=PolicySpec("oracle"), source="oracle",
                             loop=LoopConfig(), meta={"tags": ["cluster"]})  # fmt: skip
    assert pickle.loads(pickle.dumps(request)) == request  # data: it travels to any node
    sink = BufferSink()
    record = run_request(request, session, store=sink)
    assert record["success"] and record["episode_id"] == request.episode_id
    (buffered,) = sink.episodes
    buffered = pickle.loads(pickle.dumps(buffered))  # as it comes back from a node
    assert buffered.steps and buffered.outcome["success"] is True

    store = Store(tmp_path / "data", durable=False)
    for _ in range(3):  # a retried request, a record delivered twice: written once
        assert commit(store, buffered, tags=("retried",)) == request.episode_id
    (episode,) = store.list_episodes()
    assert episode.id == request.episode_id and episode.status == "finished"
    assert episode.task_id == TASK and episode.source == "oracle"
    assert set(episode.tags) == {"cluster", "retried"}
    assert episode.reward == record["reward"]
    steps = store.steps(episode.id)
    assert [s.tool for s in steps] == [s["tool"] for s in buffered.steps]
    assert any(store.step_frame(s) for s in steps)  # the frames came with the record

    # half-written by a head that died mid-commit: replaced, never doubled
    with store.transaction() as db:
        db.execute("UPDATE episodes SET status = 'interrupted' WHERE id = ?", (episode.id,))
    commit(store, buffered)
    (again,) = store.list_episodes()
    assert again.status == "finished" and len(store.steps(again.id)) == len(steps)


LOCAL_RUN = f"""
import sys
from agents.store import Store
from training.eval.harness import evaluate, task_spec
from training.eval.backend import LocalBackend
from training.eval.requests import EpisodeRequest, PolicySpec
import training.cli, training.rl.rollouts, training.rl.grpo, studio.cli  # noqa: F401
store = Store(sys.argv[1], durable=False)
report = evaluate([task_spec({TASK!r})], None, store=store, source="oracle",
                  backend=None, policy_spec=PolicySpec("oracle"))
with LocalBackend(1, store=store) as backend:
    request = EpisodeRequest({TASK!r}, seed=3, policy=PolicySpec("oracle"), source="oracle")
    (outcome,) = backend.submit([request])
    assert outcome.ok and outcome.record["episode_id"] == request.episode_id, outcome
    assert backend.status().nodes[0]["slots"] == 1
ids = {{e.id for e in store.list_episodes()}}
assert request.episode_id in ids and len(ids) == 2, ids
print("RAY" if any(m == "ray" or m.startswith("ray.") for m in sys.modules) else "NO-RAY")
"""


def test_the_local_path_never_imports_ray(tmp_path) -> None:
    """eval on the local backend (the default, and named), the CLI and the trainer's modules
    load and run without Ray, installed or not."""
    out = subprocess.run([sys.executable, "-c", LOCAL_RUN, str(tmp_path / "data")],
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "NO-RAY"


def test_cluster_commands_say_in_one_line_when_no_cluster_is_up(tmp_path, monkeypatch) -> None:
    import importlib.util

    from typer.testing import CliRunner

    from studio.cli import build_app

    # Ray is in the dev extras `make test` installs: missing, this fails rather than hides
    assert importlib.util.find_spec("ray"), "Ray is not installed (pip install -e '.[dev]')"
    monkeypatch.setenv("MODELWRIGHT_CLUSTER_STATE", str(tmp_path / "cluster.json"))
    runner = CliRunner()
    status = runner.invoke(build_app(), ["cluster", "status"])
    assert status.exit_code == 2 and "Traceback" not in status.output
    assert "no cluster is up" in status.output and "cluster up" in status.output
    down = runner.invoke(build_app(), ["cluster", "down"])
    assert down.exit_code == 0 and "no cluster is up" in down.output


def test_ctrl_c_stops_the_rollouts_under_way(worker_pool) -> None:
    """A rollout of the in-process model can think for minutes. Ctrl-C (a real SIGINT to the
    main thread, which waits on the rollouts) stops the rollouts under way while their policy
    is still thinking: run_groups raises KeyboardInterrupt before any policy has answered.
    Before, the scheduler waited for every episode under way to end (a GRPO run on SIGTERM
    had not exited 45 s later)."""
    import signal
    import threading

    from agents import PolicyReply, Scheduler
    from tools import ToolSession
    from training.rl.grpo import loop_config
    from training.rl.rollouts import run_groups
    from training.train_config import GRPOSpec

    main = threading.main_thread().ident
    release = threading.Event()  # a thinking policy answers only once this is set
    asked: list[int] = []
    answered: list[int] = []

    class Thinking:
        name = "thinking"

        def reset(self, task_info: dict | None = None) -> None:
            return None

        def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
            asked.append(1)
            if len(asked) == 1:
                signal.pthread_kill(main, signal.SIGINT)  # the user's Ctrl-C
            release.wait(120)  # a long generation (the bound only keeps a broken run finite)
            answered.append(1)
            return PolicyReply(text="Done.", tool_calls=[])

    scheduler = Scheduler(2, lambda: ToolSession(worker_pool))
    # Python's own Ctrl-C handler, as in a terminal (an xdist worker ignores SIGINT)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        try:
            run_groups(scheduler, [(0, TASK)], 2, lambda seed, greedy=False: Thinking(),
                       loop_config(GRPOSpec()))  # fmt: skip
        except KeyboardInterrupt:
            interrupted = True
        else:
            interrupted = False
        answered_when_stopped = len(answered)
    finally:
        release.set()
        signal.signal(signal.SIGINT, before)
    assert interrupted and asked
    assert answered_when_stopped == 0  # the rollouts ended while their policy still thought
    assert not [t for t in threading.enumerate() if t.name.startswith("episode-worker")]
