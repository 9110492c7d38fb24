"""A cluster only its owner can reach (issue #45): `modelwright cluster up` turns on Ray's token
authentication, and another local user is refused by what it could reach before.

The owner (the suite, root) starts a real cluster with `cluster up` (one node, 127.0.0.1) in a
directory other users may enter. The attacker, the system user `mwtest` (conftest's
`ordinary_user`), then tries what the finding showed it could do: read and write the GCS
key-value store (Ray's own `GcsClient`, as `ray.experimental.internal_kv` uses it), list its
keys, and ask the node's runtime-env agent over HTTP for a pip runtime env of a local package,
first without a token and then with a guessed one; and it tries to read the token file and
the cluster's session directory. Every attempt is refused. The control: the very same script,
against a cluster started the old way (`local_cluster` without a token), succeeds in all
that does not install anything, so the test fails if auth were off. The owner's
`eval --cluster auto` still runs, and the mistakes a user can make end in one line.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("ray")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

UNAVAILABLE = 3
ATTACK = r'''
import json, os, sys, urllib.error, urllib.request
gcs, agent_port, token, session_root = sys.argv[1:5]
out = {}

def attempt(name, fn):
    try:
        out[name] = "ok: " + repr(fn())[:300]
    except BaseException as e:
        out[name] = "refused: " + type(e).__name__ + ": " + str(e)[:300]

def client():
    from ray._raylet import GcsClient
    return GcsClient(address=gcs)

attempt("read_token", lambda: open(token).read())
attempt("list_session_root", lambda: os.listdir(session_root))
attempt("kv_put", lambda: client().internal_kv_put(b"planted", b"by-attacker", True, b"mw", timeout=10))
attempt("kv_get", lambda: client().internal_kv_get(b"owner-secret", b"mw", timeout=10))
attempt("kv_keys", lambda: client().internal_kv_keys(b"", b"mw", timeout=10))

def agent(runtime_env, headers):
    from ray.core.generated import runtime_env_agent_pb2 as pb
    req = pb.GetOrCreateRuntimeEnvRequest(serialized_runtime_env=json.dumps(runtime_env),
                                          job_id=b"attacker", source_process="attacker")
    http = urllib.request.Request(f"http://127.0.0.1:{agent_port}/get_or_create_runtime_env",
                                  data=req.SerializeToString(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(http, timeout=120) as r:
            reply = pb.GetOrCreateRuntimeEnvReply()
            reply.ParseFromString(r.read())
            return f"{r.status} status={reply.status} error={reply.error_message[-160:]!r}"
    except urllib.error.HTTPError as e:
        raise PermissionError(f"HTTP {e.code}: {e.read().decode()[:200]}") from None

guess = {"Authorization": "Bearer " + os.environ.get("GUESS", "")} if os.environ.get("GUESS") else {}
attempt("agent_env_vars", lambda: agent({"env_vars": {"PLANTED": "1"}}, guess))
if os.environ.get("PIP"):
    attempt("agent_pip", lambda: agent({"pip": [os.environ["PIP"]]}, guess))
print(json.dumps(out))
'''


def mw(*args: str, env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "studio.cli", *args], capture_output=True,
                          text=True, env=env, timeout=timeout)  # fmt: skip


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return lines[0]


def clean_env(base: Path, state: str = "cluster.json") -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    return {**env, "MODELWRIGHT_CLUSTER_STATE": str(base / state),
            "MODELWRIGHT_DATA_DIR": str(base / "data")}  # fmt: skip


@pytest.fixture(scope="module")
def base():
    """A directory every user may enter (as a home directory often is): the token's own mode
    is what must keep it, not a 0700 parent (pytest's tmp_path is one)."""
    if os.geteuid() != 0:
        pytest.skip("another local user is needed: the suite runs as root to make one")
    path = Path(tempfile.mkdtemp(prefix="modelwright-cluster-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def attacker(ordinary_user, base):
    """Runs the attack script as `mwtest`: its report (one dict of attempts)."""
    script = base / "attack.py"
    script.write_text(ATTACK)
    pkg = base / "evilpkg"  # the local package it asks the agent to pip-install
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text('[project]\nname = "evilpkg"\nversion = "0"\n')
    for p in (script, pkg, pkg / "pyproject.toml"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)

    def run(gcs: str, agent_port: int, token: str, session_root: str, **env: str) -> dict:
        user = dataclasses.replace(ordinary_user, env={**ordinary_user.env, **env})
        proc = user.python(str(script), gcs, str(agent_port), token, session_root)
        assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    run.pkg = str(pkg)
    return run


@pytest.fixture(scope="module")
def owned(base):
    """`modelwright cluster up` as the owner: (address, its env, the token file, the session
    root), stopped with `cluster down` at the end."""
    env = clean_env(base)
    up = mw("cluster", "up", "--nodes", "1", "--slots", "1", env=env)
    try:
        assert up.returncode == 0, up.stderr[-3000:] + keeper_log(base / "cluster.log")
        address = re.search(r"cluster up at (127\.0\.0\.1:\d+)", up.stdout).group(1)
        assert "token authentication on" in up.stdout, up.stdout
        state = json.loads((base / "cluster.json").read_text())
        yield address, env, Path(state["token"]), Path(state["sessions"])
    finally:
        down = mw("cluster", "down", env=env)
        assert down.returncode == 0, down.stderr[-3000:]
    assert not (base / "cluster.token").exists()  # the token goes with its cluster


def keeper_log(path: Path, tail: int = 12000) -> str:
    """The keeper's log (a hung start's thread stacks), for a failed start's message: the
    fixture's folder goes when the module ends, and the log with it."""
    try:
        return "\n--- " + str(path) + " ---\n" + path.read_text(errors="replace")[-tail:]
    except OSError as exc:
        return f"\n(no keeper log: {exc})"


def agent_port(session_root: Path) -> int:
    (found,) = glob.glob(str(session_root / "r" / "session_latest" / "runtime_env_agent_port_*"))
    return int(Path(found).read_text())


def test_the_token_file_is_the_owners_alone(owned, ordinary_user) -> None:
    _, _, token, session_root = owned
    st = os.lstat(token)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == os.geteuid() and len(token.read_text().strip()) == 64
    assert stat.S_IMODE(os.lstat(session_root).st_mode) == 0o700
    assert not ordinary_user.can_read(str(token))


def test_another_user_is_refused_by_the_gcs_and_the_runtime_env_agent(owned, attacker) -> None:
    address, env, token, session_root = owned
    port = agent_port(session_root)
    plant = ("from training.eval.cluster import connect\n"
             "from ray.experimental import internal_kv as kv\n"
             "connect('auto')\n"
             "kv._internal_kv_put(b'owner-secret', b'42', namespace=b'mw')\n"
             "print(kv._internal_kv_get(b'owner-secret', namespace=b'mw'))\n")  # fmt: skip
    owner = subprocess.run([sys.executable, "-c", plant], capture_output=True, text=True,
                           env=env, timeout=600)  # fmt: skip
    assert owner.returncode == 0 and owner.stdout.strip() == "b'42'", owner.stderr[-3000:]

    refused = "refused: AuthenticationError: RPC error: InvalidAuthToken: Authentication token is missing or incorrect"
    for guess in ("", secrets.token_hex(32)):  # no token; a guessed one (both sent)
        extra = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": guess, "GUESS": guess} if guess else {}
        seen = attacker(address, port, str(token), str(session_root), PIP=attacker.pkg, **extra)
        print(f"the attacker ({'guessed token' if guess else 'no token'}) saw: {json.dumps(seen, indent=1)}")
        assert seen["read_token"].startswith("refused: PermissionError"), seen
        assert seen["list_session_root"].startswith("refused: PermissionError"), seen
        for name in ("kv_put", "kv_get", "kv_keys"):
            assert seen[name].startswith(refused), (name, seen[name])
        http = ("HTTP 403: Forbidden: Invalid authentication token" if guess
                else "HTTP 401: Unauthorized: Missing authentication token")
        for name in ("agent_env_vars", "agent_pip"):
            assert seen[name] == f"refused: PermissionError: {http}", (name, seen[name])

    # nothing was planted, the owner's value is intact, and no pip env was made
    check = plant.replace("kv._internal_kv_put(b'owner-secret', b'42', namespace=b'mw')\n",
                          "assert kv._internal_kv_get(b'planted', namespace=b'mw') is None\n")
    owner = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                           env=env, timeout=600)  # fmt: skip
    assert owner.returncode == 0 and owner.stdout.strip() == "b'42'", owner.stderr[-3000:]
    assert not glob.glob(str(session_root / "r" / "session_*" / "runtime_resources" / "pip" / "*"))


def test_the_same_attack_succeeds_on_a_cluster_without_auth(base, attacker, monkeypatch) -> None:
    """The control: a cluster started the old way answers the same script."""
    for name in [k for k in os.environ if k.startswith("RAY_AUTH")]:
        monkeypatch.delenv(name)
    from training.eval.cluster import local_cluster

    cluster = local_cluster(nodes=1, slots=1)
    try:
        head = cluster.head_node
        seen = attacker(cluster.address, head.runtime_env_agent_port, str(base / "none"),
                        head.get_session_dir_path())
    finally:
        cluster.shutdown()
    print(f"the attacker, against a cluster without auth, saw: {json.dumps(seen, indent=1)}")
    assert seen["kv_put"] == "ok: 1"
    assert seen["kv_get"] == "ok: None" and "b'planted'" in seen["kv_keys"]
    assert seen["list_session_root"].startswith("ok: ")  # /tmp/ray's session: 0777
    assert seen["agent_env_vars"].startswith("ok: \"200 status=0 "), seen  # made, for them


def test_the_owner_still_runs_eval_on_its_cluster(owned, tmp_path) -> None:
    address, env, _, _ = owned
    report = tmp_path / "report.json"
    ev = mw("eval", "--policy", "oracle", "--families", "primitive_placement", "--per-family",
            "1", "--cluster", "auto", "--json", str(report), env=env)  # fmt: skip
    assert ev.returncode == 0, ev.stderr[-3000:]
    overall = json.loads(report.read_text())["overall"]
    assert overall["episodes"] == 1 and overall["success_rate"] == 1.0, overall
    status = mw("cluster", "status", env=env)
    assert status.returncode == 0 and f"cluster {address}: 1 worker slots" in status.stdout


def test_a_missing_unreadable_or_wrong_token_is_one_line(owned, base, ordinary_user) -> None:
    address, env, token, _ = owned
    # the state names a token file that is gone: one line, not Ray's abort
    state = json.loads((base / "cluster.json").read_text())
    (base / "lost.json").write_text(json.dumps({**state, "token": str(base / "gone.token")}))
    lost = mw("cluster", "status", env=clean_env(base, "lost.json"))
    assert lost.returncode == UNAVAILABLE
    assert one_line_error(lost) == (
        f"error: cannot read the Ray cluster's token {base / 'gone.token'} (No such file or "
        "directory); only the user who ran `modelwright cluster up` can use its cluster")

    # no token (a run that is not the owner's `up`): refused in one line, at once
    none = mw("eval", "--policy", "oracle", "--families", "primitive_placement", "--per-family",
              "1", "--cluster", address, env=clean_env(base, "other.json"))  # fmt: skip
    assert none.returncode == UNAVAILABLE
    assert one_line_error(none) == (
        f"error: the Ray cluster at {address} refused this process without a token (Ray's token "
        "authentication); only the user who started it, holding its token, can use it")

    # a wrong token in Ray's own variables
    wrong = base / "wrong.token"
    wrong.write_text(secrets.token_hex(32))
    bad = mw("cluster", "status", "--address", address,
             env={**clean_env(base, "other.json"), "RAY_AUTH_MODE": "token",
                  "RAY_AUTH_TOKEN_PATH": str(wrong)})  # fmt: skip
    assert bad.returncode == UNAVAILABLE
    assert one_line_error(bad).startswith(
        f"error: the Ray cluster at {address} refused this process with the token in {wrong} ")

    # the other user's own `modelwright cluster status`: the same one line
    theirs = ordinary_user.python("-m", "studio.cli", "cluster", "status", "--address", address)
    print(f"the other user's `cluster status` said: {theirs.stderr.strip()}")
    assert theirs.returncode == UNAVAILABLE, theirs.stderr[-3000:]
    assert one_line_error(theirs).startswith(
        f"error: the Ray cluster at {address} refused this process without a token")
