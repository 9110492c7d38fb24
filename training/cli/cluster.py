"""`modelwright cluster up|status|down`: a Ray cluster for eval and rollouts (docs/CLUSTER.md).

`up` starts a head and more nodes on this machine, all on 127.0.0.1 (or joins a head at
ADDRESS), each offering `--slots` tool-worker slots, and leaves them running in a keeper
process; `eval --cluster auto` then runs its episodes there. A cluster `up` starts demands
Ray's token, kept in a 0600 file of this user's (docs/SECURITY.md). Needs the `cluster` extra.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import typer

from tools.cli.exits import fail

app = typer.Typer(help="A Ray cluster for eval and rollouts: up, status, down.", no_args_is_help=True)


def need_ray() -> None:
    if importlib.util.find_spec("ray") is None:
        fail("the cluster commands need Ray: pip install 'modelwright[cluster]'")


def print_status(address: str) -> None:
    from training.eval.cluster import cluster_status

    try:
        info = cluster_status(address)
    except (ConnectionError, RuntimeError) as exc:
        fail(f"no Ray cluster at {address} ({str(exc).splitlines()[0]}); start one with "
             "`modelwright cluster up`")  # fmt: skip
    typer.echo(f"cluster {info['address']}: {info['slots']} worker slots, "
               f"{info['slots_taken']} held by a run")  # fmt: skip
    for n in info["nodes"]:
        state = "alive" if n["alive"] else "dead"
        typer.echo(f"  node {n['node'][:12]}  {n['address']:<15} {state:<5}  {n['slots']} slots")
    typer.echo("queue: episodes wait on the head of the run that submits them "
               "(its progress line shows nodes, retried and done)")  # fmt: skip


def keeper_log() -> Path:
    """The keeper's own output (Ray's warnings, a hung start's stack): beside the state file."""
    from training.eval.cluster import state_file

    state = state_file()
    return state.with_name(state.stem + ".log")


def start_keeper(nodes: int, slots: int, address: str | None, wait_s: float,
                 log: Path) -> tuple[str | None, bool]:  # fmt: skip
    """Start the keeper (detached, its output to `log`, not to a pipe nobody reads while it
    runs) and wait until it has noted the cluster: (None, False), or why it did not and
    whether it hung (worth another try) rather than failed. A keeper still
    starting after `wait_s` stops itself (writing where it hung to `log`); its process group
    is killed here too, so nothing of a failed try is left running."""
    from training.eval.cluster import START_HUNG, read_state

    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "training.eval.cluster", "--nodes", str(nodes),
           "--slots", str(slots), "--start-within", f"{wait_s:g}",
           *(["--join", address] if address else [])]  # fmt: skip
    with open(log, "ab") as out:
        start = out.tell()
        keeper = subprocess.Popen(cmd, start_new_session=True, stdin=subprocess.DEVNULL,
                                  stdout=out, stderr=out)  # fmt: skip
    end = time.monotonic() + wait_s + 30  # its own deadline first, then this one
    while read_state() is None:
        if keeper.poll() is not None:
            why = last_line(log, start) or f"its keeper exited with status {keeper.returncode}"
            return why, keeper.returncode == START_HUNG
        if time.monotonic() > end:
            break
        time.sleep(0.2)
    else:
        return None, False
    try:
        os.killpg(keeper.pid, signal.SIGKILL)
    except OSError:
        pass
    keeper.wait()
    return f"not within {wait_s:g} s", True


def last_line(log: Path, start: int = 0) -> str:
    """The last non-blank line `log` got after byte `start`."""
    try:
        with open(log, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        lines = [ln for ln in text.splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:300] if lines else ""


@app.command("up")
def up(
    nodes: int = typer.Option(2, min=1, help="Nodes to start on this machine."),
    slots: int = typer.Option(1, min=1, help="Tool-worker slots per node (episodes at once)."),
    address: str = typer.Option(None, "--address", help="Join the head at ADDRESS instead."),
    timeout: float = typer.Option(600, help="Seconds to wait for the nodes to start."),
) -> None:
    """Start a cluster on this machine (or join one) and print its nodes."""
    need_ray()
    from training.eval.cluster import read_state, state_file

    if read_state() is not None:
        fail(f"a cluster is already up ({read_state()['address']}); `modelwright cluster "
             "down` stops it")  # fmt: skip
    state_file().unlink(missing_ok=True)
    log = keeper_log()
    log.unlink(missing_ok=True)  # this start's output only
    tries = 2  # a Ray start that hangs (rare, on a loaded machine) is stopped and tried again
    for attempt in range(1, tries + 1):
        error, hung = start_keeper(nodes, slots, address, timeout / tries, log)
        if error is None:
            break
        if attempt == tries or not hung:
            fail(f"the cluster did not start: {error} (its log: {log})")
    state = read_state()
    typer.echo(f"cluster up at {state['address']} (keeper pid {state['pid']})")
    if state.get("token"):
        typer.echo(f"token authentication on: only this user can reach it (token in "
                   f"{state['token']}, mode 0600)")  # fmt: skip
    print_status(state["address"])


@app.command("status")
def status(address: str = typer.Option(None, "--address", help="Default: the one `up` started.")) -> None:
    """Print the cluster's nodes, worker slots and queue."""
    need_ray()
    from training.eval.cluster import read_state

    state = read_state()
    if address is None and state is None:
        fail("no cluster is up; start one with `modelwright cluster up`")
    print_status(address or state["address"])


@app.command("down")
def down(timeout: float = typer.Option(120, help="Seconds to wait for the nodes to stop.")) -> None:
    """Stop the cluster `up` started."""
    need_ray()
    from training.eval.cluster import read_state

    state = read_state()
    if state is None:
        typer.echo("no cluster is up")
        return
    os.kill(int(state["pid"]), signal.SIGTERM)
    end = time.monotonic() + timeout
    while read_state() is not None and time.monotonic() < end:
        time.sleep(0.5)
    if read_state() is not None:
        fail(f"the cluster's keeper (pid {state['pid']}) did not stop within {timeout:g} s")
    typer.echo(f"cluster at {state['address']} stopped")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="cluster")
