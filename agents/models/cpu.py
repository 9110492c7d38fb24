"""Sharing the CPU: torch's threads and OpenMP wait policy for the machine as it is.

A local model runs in this process (the hf policy, SFT, GRPO); on a CPU its speed depends on
how many of the cores it may use are free, not on how many there are. Three rules:

- **Wait, don't spin.** torch's CPU wheels on Linux run their kernels on libgomp, whose idle
  threads spin at each barrier (about 300k iterations) before they sleep. While another job
  holds a core, the spinning threads burn the core the working one needs, and every parallel
  region waits for the thread that was preempted: the shipped pipeline's SFT steps took x15 as
  long beside a studio and CLI jobs. `OMP_WAIT_POLICY=PASSIVE` and `GOMP_SPINCOUNT=0` make the
  waiting threads sleep. libgomp reads them once, when torch loads it, so they are set in the
  environment before `import torch` (`prepare_openmp`, called by the `modelwright` command
  before any torch import) and in a child's environment (`child_env`). A user's own
  `OMP_WAIT_POLICY` is kept.
- **As many threads as cores are free.** `choose_threads` takes the cores this process may
  run on (`sched_getaffinity`) less what other processes keep busy (`/proc/stat` over a
  short window, the CPU time of this process and its descendants taken out -- its own tool
  workers and their template are its work, not a neighbour's; processes at nice > 0 left out unless
  this one is niced too), at least 1, at most the config's `cpu_threads`. `ThreadGovernor` measures again between steps (at most every `interval_s`)
  and changes torch's count when the machine changed. `MODELWRIGHT_THREADS=N` fixes the count.
- **Training runs below the GUI.** `background_command` wraps a command line so that it runs
  at nice 5 under `SCHED_BATCH` (the studio launches its fine-tunes so): beside a busy GUI it
  gets a quarter of a core's share and never preempts the GUI on a wake-up; nice 10 would leave
  it a tenth beside every other job of the machine as well (`MODELWRIGHT_TRAIN_NICE=N` chooses
  another). Its children (tool workers) inherit both.

torch is imported only inside `apply_threads`; importing this module is cheap.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

THREADS_ENV = "MODELWRIGHT_THREADS"  # a fixed torch thread count; "auto" (default) measures
# libgomp's: sleep at a barrier at once instead of spinning (a user's own setting is kept)
WAIT_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}
BACKGROUND_NICE = 5  # what `background_command` runs at (the GUI stays at 0)
# A core counts as free for one more thread when at least this much of it is idle: a thread
# on a core it shares waits at every barrier for its slice.
FREE_ENOUGH = 0.7


def prepare_openmp(environ: dict | None = None) -> str:
    """Set the passive wait policy in this process's environment if torch is not loaded yet
    (libgomp reads it once, on load); returns the policy in effect, for the run's record."""
    env = os.environ if environ is None else environ
    if "torch" not in sys.modules:
        for key, value in _wait_defaults(env).items():
            env[key] = value
    return wait_policy(env)


def wait_policy(environ: Mapping[str, str] | None = None) -> str:
    """The OpenMP wait policy this process's torch runs with: "passive", "active", or
    "spin then sleep (libgomp default)"; "(set after torch loaded)" when it came too late."""
    env = os.environ if environ is None else environ
    policy = env.get("OMP_WAIT_POLICY", "").strip().lower()
    said = policy or ("passive" if env.get("GOMP_SPINCOUNT", "").strip() == "0" else "")
    return said or "spin then sleep (libgomp default)"


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for a child that may run torch: `base` (default: ours) with the
    passive wait policy unless the user chose one."""
    env = dict(os.environ if base is None else base)
    env.update(_wait_defaults(env))
    return env


def _wait_defaults(env: Mapping[str, str]) -> dict[str, str]:
    if "OMP_WAIT_POLICY" in env:  # the user's choice, and libgomp's spin count with it
        return {}
    return {k: v for k, v in WAIT_ENV.items() if k not in env}


# -- how many threads --------------------------------------------------------------------


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, e.g. a container's cpuset)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads_override(environ: Mapping[str, str] | None = None) -> int | None:
    """`MODELWRIGHT_THREADS=N` (N >= 1); None when unset or "auto". A bad value is an error."""
    raw = (os.environ if environ is None else environ).get(THREADS_ENV, "").strip().lower()
    if raw in ("", "auto"):
        return None
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{THREADS_ENV}={raw!r}: a thread count (1, 2, ...) or 'auto'")
    return n


def choose_threads(cores: int, busy_elsewhere: float, cap: int | None = None,
                   override: int | None = None) -> int:  # fmt: skip
    """torch threads for `cores` usable cores of which other processes keep `busy_elsewhere`
    busy (in cores): one per core at least `FREE_ENOUGH` free, at least 1, at most `cap`.
    `override` (the user's `MODELWRIGHT_THREADS`) wins over everything."""
    if override is not None:
        return max(1, override)
    free = cores - max(0.0, busy_elsewhere)
    n = math.floor(free + (1.0 - FREE_ENOUGH))
    n = min(n, cores, cap or cores)
    return max(1, n)


@dataclass
class CpuSample:
    """Busy and total ticks of some cores (/proc/stat) and this process's CPU seconds."""

    busy: int
    total: int
    own_s: float
    at: float

    @classmethod
    def now(cls, cpus: set[int] | None = None, stat_text: str | None = None,
            count_niced: bool = True) -> CpuSample:  # fmt: skip
        """`count_niced=False` leaves out the time of processes at nice > 0 (/proc/stat's
        second column): beside a process at nice 0 they get a third of a core's share or
        less (a studio's training at nice 5, batch jobs), so they are not competitors."""
        text = stat_text
        if text is None:
            with open("/proc/stat") as fh:
                text = fh.read()
        busy = total = 0
        for line in text.splitlines():
            name, _, rest = line.partition(" ")
            if not name.startswith("cpu") or name == "cpu":
                continue
            if cpus is not None and int(name[3:]) not in cpus:
                continue
            ticks = [int(x) for x in rest.split()]
            idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
            # guest time is already counted in user time
            spent = sum(ticks[:8])
            busy += spent - idle - (0 if count_niced else ticks[1])
            total += spent
        return cls(busy, total, tree_cpu_seconds(), time.monotonic())


def tree_cpu_seconds(root: int | None = None, proc: str = "/proc") -> float:
    """CPU seconds of process `root` (default: this one) and every living descendant: the
    tool workers a run forks (through their template) are the run's own work. Falls back to
    this process's own time where /proc cannot be read."""
    root = os.getpid() if root is None else root
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    children: dict[int, list[int]] = {}
    spent: dict[int, int] = {}
    try:
        names = os.listdir(proc)
    except OSError:
        t = os.times()
        return t.user + t.system
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/stat") as fh:
                text = fh.read()
        except OSError:
            continue  # gone, or not ours to read
        fields = text.rpartition(")")[2].split()
        if len(fields) < 13:
            continue
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        spent[pid] = int(fields[11]) + int(fields[12])  # utime + stime, in ticks
    if root not in spent:
        t = os.times()
        return t.user + t.system
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += spent.get(pid, 0)
        stack.extend(children.get(pid, ()))
    return total / tick


def busy_elsewhere(before: CpuSample, after: CpuSample, cores: int) -> float:
    """Cores other processes kept busy between two samples (this process's tree's time taken
    out)."""
    total = after.total - before.total
    if total <= 0:
        return 0.0
    wall = after.at - before.at
    busy_cores = cores * (after.busy - before.busy) / total
    own_cores = (after.own_s - before.own_s) / wall if wall > 0 else 0.0
    return max(0.0, busy_cores - own_cores)


def _affinity() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _niced() -> bool:
    """Whether this process itself runs at nice > 0 (then niced processes are its peers)."""
    try:
        return os.getpriority(os.PRIO_PROCESS, 0) > 0
    except (AttributeError, OSError):
        return True


def measure_busy_elsewhere(window_s: float = 0.3) -> float:
    """Cores other processes at our priority or above keep busy now, over `window_s` (0.0
    where /proc is missing)."""
    cpus, niced = _affinity(), _niced()
    try:
        a = CpuSample.now(cpus, count_niced=niced)
        time.sleep(window_s)
        b = CpuSample.now(cpus, count_niced=niced)
    except (OSError, ValueError, IndexError):
        return 0.0
    return busy_elsewhere(a, b, len(cpus) if cpus else usable_cores())


class ThreadGovernor:
    """Chooses torch's thread count for the machine as it is, and again when it changes.

    `apply()` at the start of a stage measures a short window; `maybe_apply()` between steps
    re-measures from the last sample (no sleeping) at most every `interval_s`. Both set
    `torch.set_num_threads` when the count changes and return it; `record()` is what a run
    report keeps."""

    def __init__(self, cap: int | None = None, interval_s: float = 10.0,
                 environ: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self.cap, self.interval_s = cap, interval_s
        self.override = threads_override(environ)
        self.cores = usable_cores()
        self.cpus = _affinity()
        self.threads: int | None = None
        self.busy_elsewhere = 0.0
        self.changes = 0
        self._last: CpuSample | None = None
        self._lock = threading.Lock()

    def apply(self, window_s: float = 0.3) -> int:
        with self._lock:
            if self.override is None:
                self.busy_elsewhere = measure_busy_elsewhere(window_s)
                self._last = self._sample()
            return self._set(choose_threads(self.cores, self.busy_elsewhere, self.cap,
                                            self.override))  # fmt: skip

    def maybe_apply(self) -> int:
        with self._lock:
            if self.override is not None or self._last is None:
                return self.threads or self._set(choose_threads(self.cores, 0.0, self.cap,
                                                                self.override))  # fmt: skip
            if time.monotonic() - self._last.at < self.interval_s:
                return self.threads or 1
            now = self._sample()
            if now is not None:
                self.busy_elsewhere = busy_elsewhere(self._last, now, self.cores)
                self._last = now
            return self._set(choose_threads(self.cores, self.busy_elsewhere, self.cap))

    def _sample(self) -> CpuSample | None:
        try:
            return CpuSample.now(self.cpus, count_niced=_niced())
        except (OSError, ValueError, IndexError):
            return None

    def _set(self, n: int) -> int:
        if n != self.threads:
            if self.threads is not None:
                self.changes += 1
            self.threads = n
            apply_threads(n)
        return n

    def record(self) -> dict:
        return {"cpu_threads": self.threads, "cpu_cores": self.cores,
                "busy_elsewhere": round(self.busy_elsewhere, 2),
                "threads_from": "MODELWRIGHT_THREADS" if self.override else "measured",
                "thread_changes": self.changes, "omp_wait_policy": wait_policy()}  # fmt: skip


def apply_threads(n: int) -> None:
    import torch

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


# -- running below the GUI ---------------------------------------------------------------


def background_command(argv: list[str]) -> list[str]:
    """`argv` run at lower CPU priority (nice 5, SCHED_BATCH) with the passive wait policy."""
    return [sys.executable, "-m", "agents.models.cpu", "--background", "--", *argv]


def lower_priority(nice: int | None = None) -> dict:
    """This process (and what it starts later) below interactive ones: nice `nice` at least
    (default `MODELWRIGHT_TRAIN_NICE`, else `BACKGROUND_NICE`), and the batch scheduling
    policy (a CPU-bound job, never preferred for wake-ups)."""
    if nice is None:
        raw = os.environ.get("MODELWRIGHT_TRAIN_NICE", "").strip()
        nice = int(raw) if raw.lstrip("-").isdigit() else BACKGROUND_NICE
    done: dict = {}
    try:
        current = os.getpriority(os.PRIO_PROCESS, 0)
        if current < nice:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        done["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        done["policy"] = "SCHED_BATCH"
    except (AttributeError, OSError):
        pass
    return done


def main(argv: list[str] | None = None) -> int:
    """`python -m agents.models.cpu --background -- CMD ...`: lower our priority, exec CMD."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] != ["--background"] or "--" not in args or args.index("--") + 1 >= len(args):
        print("usage: python -m agents.models.cpu --background -- COMMAND [ARGS...]",
              file=sys.stderr)  # fmt: skip
        return 2
    cmd = args[args.index("--") + 1 :]
    lower_priority()
    os.environ.update(_wait_defaults(os.environ))
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        print(f"cannot run {cmd[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
