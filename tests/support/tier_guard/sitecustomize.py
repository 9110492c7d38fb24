"""The tier guard (tests/conftest.py): what a `fast` test must not start, and the hook that
notices it. tests/conftest.py installs `hook` in the test process; while a fast test runs it
also puts this folder on PYTHONPATH, so a child Python it starts (the CLI, a script) loads this
file as its `sitecustomize` and reports to the file named by MODELWRIGHT_TIER_GUARD."""

import os
import sys

# What an argv starts, by a word in it: the sandboxed Blender/CadQuery worker (and anything
# else run as `tools.worker`), a Ray node's processes, a virtual X display.
_HEAVY = (
    ("tools.worker", "a sandboxed Blender/CadQuery worker"),
    ("raylet", "a Ray node"),
    ("gcs_server", "a Ray node"),
    ("Xvfb", "an X server"),
)


def heavy_process(argv) -> str:
    """What `argv` (a list, or a string) boots that the fast tier must not, or ''."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    try:
        text = " ".join(os.fsdecode(a) for a in argv)
    except TypeError:
        return ""
    for word, what in _HEAVY:
        if word in text:
            return what
    return ""


def hook(event: str, args: tuple, record) -> None:
    """An audit hook's body: `record(what)` for a process start that boots something heavy."""
    if event == "subprocess.Popen" or event == "os.posix_spawn":  # (exe, argv, ...) / (path, argv, env)
        what = heavy_process(args[1])
        if what:
            record(what)


def _to_file(what: str) -> None:
    try:
        with open(os.environ["MODELWRIGHT_TIER_GUARD"], "a") as f:
            f.write(f"{what} (started by a child process)\n")
    except (OSError, KeyError):
        pass


if __name__ == "sitecustomize" and os.environ.get("MODELWRIGHT_TIER_GUARD"):
    sys.addaudithook(lambda event, args: hook(event, args, _to_file))
