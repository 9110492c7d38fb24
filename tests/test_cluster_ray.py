"""The ray backend (training/eval/cluster.py) on a cluster of 2 nodes on this machine, every
component on 127.0.0.1: eval over 20 oracle episodes while one node is killed mid-run. All
20 are in the store exactly once, their rewards equal a single-machine run of the same task
ids, and the episodes the dead node was running are run again and marked retried. First, on
the same cluster (started once for the module), one GRPO step's rollout groups
(`run_groups`, `rollouts.backend: ray`) give the same rows as on the local backend."""

from __future__ import annotations

import ipaddress

import pytest

from agents import LoopConfig
from agents.store import Store
from training import make_policy
from training.eval.harness import evaluate, task_spec
from training.eval.requests import PolicySpec

pytestmark = [
    pytest.mark.slow,
    # ~2.5 min on an idle 2-core machine; a loaded one starts Ray nodes far slower (no
    # wall-clock assert: only this ceiling)
    pytest.mark.timeout(2400),
]  # fmt: skip

# Cheap level-1 tasks (Blender only, two oracle calls each), 20 distinct ids.
FAMILIES = ("primitive_placement", "scene_editing", "materials", "primitive_placement")
IDS = [f"{FAMILIES[k % 4]}:1:{110000 + k}" for k in range(20)]
KILL_AFTER = 4  # results back before the second node dies (while it runs an episode)


def loopback(host: str) -> bool:
    ip = ipaddress.ip_address(host.split("%")[0])
    return ip.is_loopback or bool(getattr(ip, "ipv4_mapped", None) and ip.ipv4_mapped.is_loopback)


def ray_sockets() -> list[tuple[str, str, str]]:
    """(process, local address, remote address) of every inet socket of the Ray processes
    this test started (GCS, raylets, agents, workers)."""
    import psutil

    out = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(proc.cmdline())
            if "ray" not in cmd:
                continue
            for c in proc.net_connections(kind="inet"):
                out.append((proc.name(), c.laddr.ip, c.raddr.ip if c.raddr else ""))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def test_a_head_that_fails_after_it_started_is_started_again_as_a_head():
    """Ray notes a new head's address in /tmp/ray, a file every cluster on the machine shares:
    another cluster's shutdown can remove it under a head that just started, and the start
    fails there. The next try must start a head again: it once joined the dead one as a node
    and waited 300 s for its GCS (two `cluster up` at once). A real head, failed once after it
    started; runs before this module's cluster exists."""
    import ray
    from ray.cluster_utils import Cluster

    from training.eval.cluster import loopback, node_args, start_node

    class FailsOnceStarted(Cluster):
        failed = 0

        def add_node(self, **kw):
            node = super().add_node(**kw)
            if not self.failed:
                self.failed += 1
                raise FileNotFoundError("ray_current_cluster")  # as Ray's own open raised
            return node

    loopback()
    cluster = FailsOnceStarted()
    try:
        head = start_node(cluster, node_args(1), attempts=2)
        assert cluster.failed == 1 and head is cluster.head_node and head.is_head()
        cluster.wait_for_nodes()
        ray.init(address=cluster.address)
        try:
            assert [n["Alive"] for n in ray.nodes()].count(True) == 1
        finally:
            ray.shutdown()
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """2 nodes on 127.0.0.1, 1 tool slot each, that demand a token as `cluster up`'s do (the
    backend and GRPO's rollouts reach them with it); the last test of the module kills one."""
    import os

    import ray

    from training.eval.cluster import (
        AUTH_MODE,
        AUTH_TOKEN,
        AUTH_TOKEN_PATH,
        local_cluster,
        new_token,
    )

    saved = {k: os.environ.get(k) for k in (AUTH_MODE, AUTH_TOKEN, AUTH_TOKEN_PATH)}
    token = new_token(tmp_path_factory.mktemp("cluster") / "cluster.token")
    cluster = local_cluster(nodes=2, slots=1, token=token)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        for k, v in saved.items():  # this process's later Ray use is as before
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def test_grpo_rollout_groups_on_ray_match_the_local_backend(cluster, tmp_path) -> None:
    """One step's groups (2 tasks x 2 rollouts) on the local backend and on the Ray nodes:
    the same task ids and seeds, rewards, turn structure and rows; the adapter version
    travels with each rollout and into the head's store."""
    from training.eval.backend import make_backend
    from training.eval.spec import episode_scheduler
    from training.rl.rollouts import run_groups, training_rows

    slots, group = [(0, IDS[0]), (1, IDS[2])], 2
    config = LoopConfig(max_steps=4, record_artifacts=False)
    meta = {"model": "oracle", "adapter": "oracle@step-3", "tags": ["run:parity", "rl"]}
    stores = {k: Store(tmp_path / k, durable=False) for k in ("local", "ray")}

    scheduler = episode_scheduler(2, seed=0)
    try:
        local = run_groups(scheduler, slots, group, lambda seed, greedy=False: make_policy("oracle"),
                           config, run_seed=5, store=stores["local"], meta=meta)  # fmt: skip
    finally:
        scheduler.close()
    with make_backend("ray", cluster=cluster.address, store=stores["ray"]) as backend:
        with pytest.raises(ValueError, match="not the in-process model"):
            run_groups(None, slots, group, lambda seed: None, config, backend=backend)
        remote = run_groups(None, slots, group, None, config, run_seed=5, meta=meta,
                            backend=backend,
                            policy_spec_for=lambda seed, greedy=False: PolicySpec("oracle"))  # fmt: skip
        nodes = {n["node"] for n in backend.status().nodes}

    def shape(groups):
        return [[(r.task_id, r.seed, r.reward, r.success, r.version,
                  [[c.call.name for c in s.calls] for s in r.result.steps])
                 for r in g] for g in groups]  # fmt: skip

    assert shape(remote) == shape(local)
    assert [r.task_id for g in local for r in g] == [IDS[0]] * 2 + [IDS[2]] * 2
    assert all(r.success and r.version == "oracle@step-3" for g in local for r in g)
    assert all(any(s.calls for s in r.result.steps) for g in local for r in g)
    assert {r.node for g in local for r in g} == {"local"}
    assert {r.node for g in remote for r in g} <= nodes and not any(
        r.retried for g in remote for r in g)
    assert training_rows(remote, 4, 0, 1) == training_rows(local, 4, 0, 1)
    # the step's log line counts the nodes its rollouts ran on, and the retried ones
    from training.rl.rollouts import StepStats

    used = {r.node for g in remote for r in g}
    assert StepStats.of(local, local, 0.0).log_items()["rollout/nodes"] == 1.0
    logged = StepStats.of(remote, remote, 0.0).log_items()
    assert logged["rollout/nodes"] == float(len(used)) and logged["rollout/retried"] == 0.0
    # each store holds the 4 rollouts, once, with their version and tags
    for store in stores.values():
        episodes = store.list_episodes()
        assert sorted(e.task_id for e in episodes) == sorted(r.task_id for g in local for r in g)
        assert {(e.source, e.adapter, e.status) for e in episodes} == {
            ("rollout", "oracle@step-3", "finished")}
        assert all("run:parity" in e.tags for e in episodes)


def test_eval_on_two_ray_nodes_survives_a_node_dying(cluster, tmp_path) -> None:
    import ray

    from training.eval.cluster import RayBackend

    specs = [task_spec(i) for i in IDS]
    backend = None
    try:
        single = evaluate(specs, lambda: make_policy("oracle"), workers=2)  # one machine
        store = Store(tmp_path / "data", durable=False)
        backend = RayBackend(cluster.address, store=store)
        # every address Ray reports, and every socket its processes hold, is loopback
        assert cluster.address.startswith("127.0.0.1:")
        assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
        nodes = ray.nodes()
        assert len([n for n in nodes if n["Alive"]]) == 2
        assert all(n["NodeManagerAddress"] == "127.0.0.1" for n in nodes)
        assert backend.status().slots == 2
        sockets = ray_sockets()
        assert sockets, "no Ray process sockets found: the check would prove nothing"
        outside = [s for s in sockets if not loopback(s[1]) or (s[2] and not loopback(s[2]))]
        assert not outside, outside

        (victim,) = cluster.worker_nodes  # the head node holds the driver's GCS
        killed: dict = {}

        def progress(record: dict, done: int, total: int) -> None:
            if killed or done < KILL_AFTER:
                return
            running = [r for (_i, r, node) in backend.inflight.values() if node == victim.node_id]
            if running:  # the node dies with work on it
                killed["ids"] = {r.episode_id for r in running}
                killed["done"] = done
                cluster.remove_node(victim, allow_graceful=False)

        report = evaluate(specs, None, backend=backend, policy_spec=PolicySpec("oracle"),
                          store=store, source="oracle", progress=progress)  # fmt: skip
        status = backend.status()
    finally:
        if backend is not None:
            backend.close()

    assert killed, "the second node never had work in flight"
    assert [n["alive"] for n in status.nodes].count(False) == 1

    # all 20, exactly once, in the store and in the report
    episodes = store.list_episodes()
    assert len(episodes) == len(IDS)
    assert sorted(e.task_id for e in episodes) == sorted(IDS)
    assert all(e.status == "finished" for e in episodes)
    records = report["episodes"]
    assert [r["task"] for r in records] == IDS
    assert {r["episode_id"] for r in records} == {e.id for e in episodes}

    # the same rewards as on one machine
    assert [r["reward"] for r in records] == [r["reward"] for r in single["episodes"]]
    assert [r["success"] for r in records] == [r["success"] for r in single["episodes"]]
    assert report["overall"]["success_rate"] == single["overall"]["success_rate"] == 1.0

    # the dead node's episodes were run again and say so, in the report and the store
    retried = {r["episode_id"] for r in records if r.get("meta", {}).get("retried")}
    assert retried and retried <= killed["ids"]
    assert {e.id for e in episodes if "retried" in e.tags} == retried
    assert status.retried == len(retried)
