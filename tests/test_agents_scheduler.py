"""The episode scheduler on real tool workers: order, seeds, retries of worker deaths only."""

from __future__ import annotations

import threading

import pytest

from agents.loop.episode_loop import LoopConfig, run_episode
from agents.loop.scheduler import Scheduler
from agents.policies.protocol import PolicyError
from agents.policies.simple import PlanPolicy, calls_from_plan
from tools import ToolSession

BLIND = LoopConfig(observe="never")
CUBE = {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}


def cube_episode(session, seed):
    policy = PlanPolicy(calls_from_plan([{"tool": "add_primitive", "args": CUBE}]))
    return run_episode(policy, session, "a cube", config=BLIND).summary()


def test_priorities_then_submission_order_and_fixed_seeds(worker_pool) -> None:
    ran: list[str] = []

    def job(name):
        def run(session, seed):
            ran.append(name)
            return seed

        return run

    scheduler = Scheduler(1, lambda: ToolSession(worker_pool), seed=7)
    scheduler.submit("low", job("low"), priority=0)
    scheduler.submit("high", job("high"), priority=5)
    scheduler.submit("low2", job("low2"), priority=0)
    scheduler.submit("fixed", job("fixed"), priority=1, seed=1234)
    outcomes = scheduler.run()
    assert ran == ["high", "fixed", "low", "low2"]
    assert [o.key for o in outcomes] == ["low", "high", "low2", "fixed"]  # submission order
    assert outcomes[3].result == 1234
    again = Scheduler(1, lambda: ToolSession(worker_pool), seed=7)
    for key in ("low", "high", "low2"):
        again.submit(key, job(key))
    assert [o.result for o in again.run()] == [o.result for o in outcomes[:3]]


def test_worker_death_in_setup_is_retried_on_a_fresh_worker(worker_pool) -> None:
    killed: list[int] = []

    def episode(session, seed):
        def setup(s):
            if not killed:  # the first attempt loses its worker while building the start
                killed.append(1)
                s._fault("exit")

        policy = PlanPolicy(calls_from_plan([{"tool": "add_primitive", "args": CUBE}]))
        return run_episode(policy, session, "a cube", setup=setup, config=BLIND)

    scheduler = Scheduler(1, lambda: ToolSession(worker_pool), retry_backoff_s=0.0)
    scheduler.submit("ep", episode)
    (outcome,) = scheduler.run()
    assert outcome.ok and outcome.attempts == 2 and scheduler.retries == 1
    assert outcome.result.status == "done" and outcome.result.tool_errors == 0


def test_policy_failures_are_not_retried(worker_pool) -> None:
    class Down:
        name = "down"

        def reset(self, task_info=None):
            pass

        def act(self, messages, tools):
            raise PolicyError("server down")

    def failing(session, seed):
        return run_episode(Down(), session, "x", config=BLIND)

    def bad_calls(session, seed):
        plan = [{"tool": "transform", "args": {"name": "Nope"}}] * 4
        return run_episode(PlanPolicy(calls_from_plan(plan)), session, "x", config=BLIND)

    def raising(session, seed):
        raise ValueError("a bug in the job")

    scheduler = Scheduler(1, lambda: ToolSession(worker_pool))
    for key, fn in (("fatal", failing), ("errors", bad_calls), ("bug", raising)):
        scheduler.submit(key, fn)
    fatal, errors, bug = scheduler.run()
    assert scheduler.retries == 0
    assert fatal.attempts == errors.attempts == bug.attempts == 1
    assert fatal.result.status == "fatal" and errors.result.tool_errors == 4
    assert not bug.ok and not bug.infrastructure and "a bug in the job" in bug.error


def test_a_failing_pool_is_retried_then_reported(worker_pool) -> None:
    calls = [0]

    def flaky_factory():
        calls[0] += 1
        if calls[0] == 1:
            raise OSError("could not start a worker")
        return ToolSession(worker_pool)

    scheduler = Scheduler(1, flaky_factory, retry_backoff_s=0.0)
    scheduler.submit("ep", cube_episode)
    (outcome,) = scheduler.run()
    assert outcome.ok and outcome.attempts == 2

    def broken_factory():
        raise OSError("no workers at all")

    scheduler = Scheduler(1, broken_factory, max_retries=2, retry_backoff_s=0.0)
    scheduler.submit("ep", cube_episode)
    (outcome,) = scheduler.run()
    assert not outcome.ok and outcome.infrastructure and outcome.attempts == 3
    assert "no workers at all" in outcome.error


def test_two_workers_run_jobs_in_parallel(worker_pool) -> None:
    inside = [0]
    peak = [0]
    lock = threading.Lock()
    both = threading.Barrier(2, timeout=60)

    def job(session, seed):
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        both.wait()  # only passes if two jobs run at once
        result = cube_episode(session, seed)
        with lock:
            inside[0] -= 1
        return result

    scheduler = Scheduler(2, lambda: ToolSession(worker_pool))
    scheduler.submit("a", job)
    scheduler.submit("b", job)
    outcomes = scheduler.run()
    assert peak[0] == 2
    assert {o.worker for o in outcomes} == {0, 1}
    assert all(o.ok and o.result["tool_errors"] == 0 for o in outcomes)


def test_every_job_gets_a_fresh_worker_that_dies_with_it(worker_pool) -> None:
    """One worker, one episode: nothing a job leaves in its worker reaches the next job, on
    the same slot or in the next run, and each job's session is closed when it ends."""
    opened: list[ToolSession] = []

    def factory():
        opened.append(ToolSession(worker_pool))
        return opened[-1]

    def add(name):
        def run(session, seed):
            session.call("add_primitive", {**CUBE, "name": name})
            return sorted(o["name"] for o in session.scene()["objects"]), session.worker.scratch

        return run

    scheduler = Scheduler(1, factory)
    for name in ("X", "Y"):
        scheduler.submit(name, add(name))
    outcomes = scheduler.run()
    scheduler.submit("Z", add("Z"))
    outcomes += scheduler.run()
    assert [o.result[0] for o in outcomes] == [["X"], ["Y"], ["Z"]]
    assert len({o.result[1] for o in outcomes}) == 3  # three workers, three scratches
    assert len(opened) == 3 and all(s.closed for s in opened)


@pytest.mark.parametrize("lands_on", ["main", "worker"])
def test_ctrl_c_stops_a_run_after_the_episodes_in_progress(worker_pool, lands_on) -> None:
    """Ctrl-C in the thread that runs the scheduler (a real SIGINT while it waits on its
    workers): the episode in progress ends, no other starts, run() raises KeyboardInterrupt,
    and no worker thread is left to keep the process alive. The kernel may hand a process's
    signal to any thread: one that lands on the episode's own thread stops the run as well
    (once, the main thread's plain join woke only when the last episode ended: a SIGTERM to
    `train pipeline` ran the whole eval stage)."""
    import signal

    ran: list[str] = []
    cancel = threading.Event()
    main = threading.main_thread().ident

    def job(name):
        def run(session, seed):
            ran.append(name)
            if name == "first":
                target = main if lands_on == "main" else threading.get_ident()
                signal.pthread_kill(target, signal.SIGINT)  # the user's Ctrl-C
                assert cancel.wait(60), "the run was not cancelled"
            return cube_episode(session, seed)

        return run

    scheduler = Scheduler(1, lambda: ToolSession(worker_pool))
    for name in ("first", "second", "third"):
        scheduler.submit(name, job(name))
    # Python's own Ctrl-C handler, as in a terminal (an xdist worker ignores SIGINT)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        scheduler.run(cancel=cancel)
    except KeyboardInterrupt:
        interrupted = True
    else:
        interrupted = False
    finally:
        signal.signal(signal.SIGINT, before)
    assert interrupted and cancel.is_set()
    assert ran == ["first"]
    assert not [t for t in threading.enumerate() if t.name.startswith("episode-worker")]
    scheduler.submit("after", job("after"))  # the dropped jobs do not come back
    assert [o.key for o in scheduler.run()] == ["after"]
