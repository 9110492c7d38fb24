"""The ray backend (training/eval/cluster.py) on a cluster of 2 nodes on this machine, every
component on 127.0.0.1: eval over 20 oracle episodes while one node is killed mid-run. All
20 are in the store exactly once, their rewards equal a single-machine run of the same task
ids, and the episodes the dead node was running are run again and marked retried."""

from __future__ import annotations

import importlib.util
import ipaddress

import pytest

from agents.policies import make_policy
from agents.store import Store
from training.eval.harness import evaluate, task_spec
from training.eval.requests import PolicySpec

pytestmark = [
    pytest.mark.slow,
    # ~2.5 min on an idle 2-core machine; a loaded one starts Ray nodes far slower (no
    # wall-clock assert: only this ceiling)
    pytest.mark.timeout(2400),
    pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                       reason="Ray is not installed (pip install 'modelwright[cluster]')"),
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


def test_eval_on_two_ray_nodes_survives_a_node_dying(tmp_path) -> None:
    import ray

    from training.eval.cluster import RayBackend, local_cluster

    specs = [task_spec(i) for i in IDS]
    cluster = local_cluster(nodes=2, slots=1)
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
        ray.shutdown()
        cluster.shutdown()

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
