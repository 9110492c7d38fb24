"""What the studio adds to the worker's state in a project: its undo stack, the view, the
chat and the episode links, read from the window and put back into it."""

from __future__ import annotations

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QListWidgetItem

from studio.controller import AgentRunCommand, ToolCallCommand
from studio.project.archive import Project
from tools.text import printable


def snapshot(window, episodes: list[str]) -> tuple[Project, int]:
    """The window's part of a project (no worker state yet), and how many worker undo steps
    its undo stack takes."""
    c = window.controller
    undo, steps = undo_entries(c.undo_stack)
    links = list(dict.fromkeys([*episodes, *c.session_episodes]))
    project = Project(
        undo=undo,
        journal=[dict(x) for x in c.journal.calls],
        # the display unit travels with the project (a part drawn in mm reopens in mm)
        view={**view_of(window.viewport_panel.viewport.camera),
              "units": getattr(c.scene, "units", "auto")},
        chat=chat_of(window.agent),
        episodes=links,
        task=getattr(c.task, "id", None),
    )
    return project, steps


def undo_entries(stack) -> tuple[list[dict], int]:
    """The undo stack up to its index as data, and how many worker undo steps it takes (an
    agent run is a macro holding one AgentRunCommand)."""
    entries, steps = [], 0
    for i in range(stack.index()):
        cmd = stack.command(i)
        inner = cmd.child(0) if cmd.childCount() else cmd
        if isinstance(inner, AgentRunCommand):
            calls, agent = inner.calls, True
        elif isinstance(inner, ToolCallCommand):
            calls, agent = [{"tool": inner.tool, "args": dict(inner.args)}], False
        else:
            continue
        entries.append({"text": cmd.text(), "calls": [dict(c) for c in calls], "agent": agent})
        steps += len(calls)
    return entries, steps


def keep_last(undo: list[dict], depth: int) -> list[dict]:
    """The newest undo entries whose worker steps fit in `depth` (the history the file holds)."""
    kept, steps = [], 0
    for entry in reversed(undo):
        steps += len(entry["calls"])
        if steps > depth:
            break
        kept.append(entry)
    return kept[::-1]


def restore_undo(controller, undo: list[dict]) -> None:
    """Push the saved entries: the worker already holds their commits, so each first redo()
    is the no-op every pushed command gets, and undo/redo then work as before the save."""
    for entry in undo:
        if entry.get("agent"):
            cmd = AgentRunCommand(controller, entry["calls"], "run")
        else:
            call = entry["calls"][0]
            cmd = ToolCallCommand(controller, call["tool"], dict(call.get("args", {})), "human")
        cmd.setText(entry["text"][:200])
        controller.undo_stack.push(cmd)
    controller.undo_stack.setClean()


def view_of(cam) -> dict:
    return {
        "azimuth_deg": cam.azimuth_deg,
        "elevation_deg": cam.elevation_deg,
        "distance": cam.distance,
        "target": list(cam.target),
        "lens_mm": cam.lens_mm,
    }


def apply_view(cam, view: dict) -> None:
    cam.azimuth_deg, cam.elevation_deg = float(view["azimuth_deg"]), float(view["elevation_deg"])
    cam.distance, cam.lens_mm = float(view["distance"]), float(view["lens_mm"])
    cam.target = [float(x) for x in view["target"]]


def chat_of(agent) -> dict:
    lines = []
    for i in range(agent.steps.count()):
        item = agent.steps.item(i)
        color = item.foreground().color().name() if item.foreground().style() else None
        lines.append({"text": item.text(), "color": color})
    return {"goal": agent.goal.toPlainText(), "lines": lines}


def restore_chat(agent, chat: dict) -> None:
    agent.goal.setPlainText(chat.get("goal", ""))
    agent.steps.clear()
    for line in chat.get("lines", []):
        item = QListWidgetItem(printable(line["text"]))
        if line.get("color"):
            item.setForeground(QColor(line["color"]))
        agent.steps.addItem(item)
