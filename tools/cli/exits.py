"""How every `modelwright` command ends: one exit-code convention and one-line errors.

    0  ok
    1  the work ran and failed (a tool call failed, a replay diverged, a check found problems)
    2  bad usage or input (an unknown option, a missing or malformed file, an unknown id)
    3  the environment cannot do it now (a server that does not answer, vLLM not installed,
       a store another process holds)
  130  interrupted (Ctrl-C, or SIGTERM: `kill`, a job scheduler; the command stops the same way)

A command says "the user must fix this" by raising `UserError` (or calling `fail`); the
errors other layers already raise for a user's mistake (`StoreError`, `TaskError`, ...) are
mapped by `USER_ERRORS` in the app that assembles the commands. `guarded_group` turns them
into `error: <one line>` on stderr and the exit code, so no user error ends in a traceback;
anything else is a bug and keeps its traceback. Kept free of typer/click at import time: the
store and the task suite import `UserError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from enum import IntEnum
from typing import NoReturn


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    UNAVAILABLE = 3
    INTERRUPTED = 130


class UserError(Exception):
    """A problem the user can act on; its message says what and what to do."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, exit_code: ExitCode | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class Unavailable(UserError):
    """Something outside the command is missing or does not answer (a server, a package)."""

    exit_code = ExitCode.UNAVAILABLE


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's exception would be: a command stops the same way (what
    it recorded is kept) and says so in one line."""


# commands that keep the default SIGTERM: the studio's window (its own recovery file)
OWN_SIGNALS = frozenset({"studio"})


def _raise_terminated(signum, frame) -> NoReturn:  # noqa: ANN001 - a signal handler
    raise Terminated()


@contextmanager
def sigterm_as_interrupt(command: str) -> Iterator[None]:
    """While a command runs, SIGTERM raises `Terminated` in the main thread (if nothing else
    took SIGTERM, and `command` is not in OWN_SIGNALS)."""
    import signal
    import threading

    if (command in OWN_SIGNALS or threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> NoReturn:
    raise UserError(message, code)


def one_line(message: str) -> str:
    """The message on one line (library messages sometimes carry newlines and indents), its
    control and bidi characters escaped (it may quote a worker, a store or a file)."""
    from tools.text import printable_line

    return printable_line(" ".join(str(message).split()))


def classify(exc: BaseException, user_errors: Mapping[str, ExitCode]) -> ExitCode | None:
    """The exit code of a user's mistake, or None for a bug. `user_errors` names classes
    as `module.QualName` (matched along the MRO, so subclasses follow their base)."""
    if isinstance(exc, UserError):
        return exc.exit_code
    for cls in type(exc).__mro__:
        code = user_errors.get(f"{cls.__module__}.{cls.__qualname__}")
        if code is not None:
            return code
    if isinstance(exc, FileNotFoundError | NotADirectoryError | IsADirectoryError |
                  PermissionError | FileExistsError):
        return ExitCode.USAGE  # a path the user gave; the message names it
    return None


def describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return one_line(str(exc)) or type(exc).__name__


def guarded_group(user_errors: Mapping[str, ExitCode]) -> type:
    """A typer group class whose commands end by the convention above."""
    import typer
    from typer.core import TyperGroup

    try:  # typer >= 0.20 carries its own click
        from typer._click.exceptions import NoArgsIsHelpError, UsageError
    except ImportError:  # pragma: no cover - older typer on the click package
        from click.exceptions import NoArgsIsHelpError, UsageError

    def usage(exc: UsageError, ctx) -> typer.Exit:  # noqa: ANN001 - a click context
        where = (exc.ctx or ctx).command_path
        typer.echo(f"error: {one_line(exc.format_message())} (see `{where} --help`)", err=True)
        return typer.Exit(int(ExitCode.USAGE))

    class GuardedGroup(TyperGroup):
        def parse_args(self, ctx, args):  # noqa: ANN001, ANN201 - the root's own options
            try:
                return super().parse_args(ctx, args)
            except NoArgsIsHelpError:
                raise
            except UsageError as exc:
                raise usage(exc, ctx) from None

        def invoke(self, ctx):  # noqa: ANN001, ANN201 - click's signature
            words = [*getattr(ctx, "_protected_args", ()), *ctx.args]
            with sigterm_as_interrupt(words[0] if words else ""):
                return self._guarded(ctx)

        def _guarded(self, ctx):  # noqa: ANN001, ANN202 - click's context
            try:
                return super().invoke(ctx)
            except NoArgsIsHelpError:
                raise  # prints the help
            except UsageError as exc:  # one line too, with where to read more
                raise usage(exc, ctx) from None
            except (typer.Exit, typer.Abort, typer.TyperException):
                raise  # typer's own endings
            except KeyboardInterrupt as exc:
                typer.echo("stopped (SIGTERM)" if isinstance(exc, Terminated) else "interrupted",
                           err=True)
                raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
            except Exception as exc:  # noqa: BLE001 - sorted into user errors and bugs
                code = classify(exc, user_errors)
                if code is None:
                    raise
                typer.echo(f"error: {describe(exc)}", err=True)
                raise typer.Exit(int(code)) from None

    return GuardedGroup
