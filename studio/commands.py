"""The `studio` command (and the bare `modelwright`), mounted by studio/cli.py.

Kept light: Qt is imported only when the command runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

DEFAULT_TASK = "composition:2:5"  # what `make run` runs without a display
OFFSCREEN_OUT = Path("runs/studio-offscreen")
RECOVER_CHOICES = ("ask", "yes", "no")  # `--recover`: a scene a studio that did not close cleanly left


def _no_display() -> bool:
    return not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY") \
        and not os.environ.get("QT_QPA_PLATFORM")


def offscreen_session(kw: dict) -> dict:
    """The options of the one session run instead of an invisible window: the person's goal
    or calls when given, else the given task or the default one with the oracle unless a
    policy was chosen; a screenshot under runs/studio-offscreen/, and the episode recorded
    where `make run` records it (--data-dir, else $MODELWRIGHT_DATA_DIR, else beside the
    screenshot)."""
    data_dir = kw.get("data_dir") or os.environ.get("MODELWRIGHT_DATA_DIR") or str(OFFSCREEN_OUT / "data")
    out = {**kw, "exit_when_done": True, "data_dir": data_dir,
           "screenshot": kw.get("screenshot") or OFFSCREEN_OUT / "screenshot.png"}
    if not (kw.get("goal") or kw.get("hand") or kw.get("project")):  # nothing of theirs: a default task
        out["task"] = kw.get("task") or DEFAULT_TASK
        if kw.get("policy") in (None, "none"):
            out["policy"] = "oracle"
    out["autorun"] = bool(out.get("task") or out.get("goal"))
    return out


def open_studio(**kw) -> None:
    """Open the studio window (what `modelwright` with no command does). With no display an
    interactive window would be invisible and never end: like `make run`, run one session
    offscreen (the given goal or task, else a default task with the oracle), save a
    screenshot, exit."""
    from studio.app import StudioOptions

    if _no_display():
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        if not kw.get("exit_when_done"):
            kw = offscreen_session(kw)
            Path(kw["screenshot"]).parent.mkdir(parents=True, exist_ok=True)
            what = (f"task {kw['task']}" if kw.get("task") else "your goal" if kw.get("goal")
                    else f"project {Path(kw['project']).name}" if kw.get("project") else "your calls")
            typer.echo(f"No display found: running {what} offscreen with the {kw.get('policy') or 'oracle'} "
                       f"policy, then exiting (screenshot: {kw['screenshot']}). For the window, run on a desktop, "
                       "over `ssh -X`, or under a virtual display: `xvfb-run -a modelwright`.", err=True)
        else:
            typer.echo("No display found: running offscreen (QT_QPA_PLATFORM=offscreen).", err=True)
    from studio.app import run_studio

    raise typer.Exit(run_studio(StudioOptions(**kw)))


def register(app: typer.Typer) -> None:
    @app.command("studio")
    def studio(
        project: Path = typer.Argument(None, exists=True, dir_okay=False, metavar="PROJECT",
                                       help="A project (.mwproj) to open."),
        task: str = typer.Option(None, "--task", help="Task id family:level:seed to load."),
        policy: str = typer.Option("oracle", "--policy", help="oracle | openai | hf:PATH | none | script:FILE"),
        autorun: bool = typer.Option(False, "--autorun", help="Run the policy on the task at once."),
        screenshot: Path = typer.Option(None, "--screenshot", help="Save the whole window here after the last step."),
        exit_when_done: bool = typer.Option(False, "--exit-when-done", help="Quit after the run (prints the summary JSON)."),
        theme: str = typer.Option(None, "--theme", help="dark | light"),
        data_dir: Path = typer.Option(None, "--data-dir", help="Trajectory store folder."),
        settings_file: Path = typer.Option(None, "--settings", help="Use this .ini for settings and layout."),
        hand: Path = typer.Option(None, "--hand", exists=True, dir_okay=False,
                                  help="JSONL of calls made by hand first ({tool, args} a line)."),
        goal: str = typer.Option(None, "--goal", help="A free-form goal for --autorun (no task)."),
        select: str = typer.Option(None, "--select", help="After the run, select this object (auto: the first CAD part)."),
        recover: str = typer.Option("ask", "--recover", help="A scene autosaved by a studio that did not close "
                                    "cleanly: ask (a bar offers it), yes (recover it at once) or no (discard it)."),
    ) -> None:
        """Open Modelwright Studio; with --task/--autorun it runs an episode in the window."""
        if hand and task:
            raise typer.BadParameter("--hand builds on a free-form scene: use it with --goal, "
                                     "not --task", param_hint="--hand")
        if autorun and not (task or goal):
            raise typer.BadParameter("--autorun needs --task ID or --goal TEXT", param_hint="--autorun")
        from studio.theme import THEMES

        if theme is not None and theme not in THEMES:  # else the window would quietly fall back to dark
            raise typer.BadParameter(f"unknown theme {theme!r}; choose {' or '.join(THEMES)}",
                                     param_hint="--theme")
        if recover not in RECOVER_CHOICES:
            raise typer.BadParameter(f"choose {', '.join(RECOVER_CHOICES)}, not {recover!r}",
                                     param_hint="--recover")
        if recover == "yes" and (project or task or hand):  # each would replace the recovered model
            raise typer.BadParameter("--recover yes brings back the autosaved scene: use it without "
                                     "PROJECT, --task and --hand", param_hint="--recover")
        if project and (task or hand):  # each would replace the project's model at once
            raise typer.BadParameter("a project opens its own scene: use it without --task and "
                                     "--hand (--goal continues it)", param_hint="PROJECT")
        if exit_when_done and _no_display() and not (task or goal or hand or project):
            # no window anyone can close and nothing to finish: it would wait forever
            raise typer.BadParameter("with no display there is nothing to wait for: pass --task ID "
                                     "or --goal TEXT, or open a display (`xvfb-run -a modelwright "
                                     "studio`)", param_hint="--exit-when-done")
        if task:  # a bad id is one line now (exit 2), not a dialog after the window opens
            from training import get_task

            get_task(task)
        if autorun:  # a run the Agent dock would refuse: one line now, not a window that waits
            from studio.agent.runner import AgentRequest, refusal

            why = refusal(AgentRequest(policy=policy, task_id=task, goal=goal or ""))
            if why:
                raise typer.BadParameter(why, param_hint="--policy")
        open_studio(task=task, policy=policy, autorun=autorun, screenshot=screenshot, hand=hand, goal=goal,
                    exit_when_done=exit_when_done, theme=theme,
                    data_dir=str(data_dir) if data_dir else None,
                    settings_file=str(settings_file) if settings_file else None, select=select,
                    project=str(project) if project else None, recover=recover)
