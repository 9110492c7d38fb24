"""How `tasks show` and `score` read to a person (their `--json` keeps the raw form)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

WIDTH = 88
STEP_SUFFIXES = (".step", ".stp")


def describe_task(view: dict[str, Any], image: Path | None) -> str:
    """A task as sections: what is asked, where it starts, how it is checked, the plan."""
    lines = [f"{view['id']}  ({view['family']}, level {view['level']}, seed {view['seed']}, "
             f"{view['split']} split)", "", "Prompt"]
    lines += textwrap.wrap(view["prompt"], WIDTH, initial_indent="  ", subsequent_indent="  ")
    if view.get("parameters"):
        lines += ["", "Parameters"]
        for k, v in view["parameters"].items():
            if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                lines.append(f"  {k}:")  # one line per object, not one truncated blob
                lines += [f"    - {', '.join(f'{ik} {_value(iv)}' for ik, iv in x.items())}"
                          for x in v]
            else:
                lines.append(f"  {k}: {_value(v)}")
    lines += ["", "Start", *(
        [f"  {i}. {_call(c)}" for i, c in enumerate(view["start"], 1)] or ["  an empty scene"])]
    if view.get("files"):
        sources = view.get("file_sources") or {}
        lines += [f"  file: {f}" + (f" ({sources[f]})" if f in sources else "")
                  for f in view["files"]]
    checks = view.get("constraints") or []
    lines += ["", f"Checked ({len(checks)})", *[f"  - {_constraint(c)}" for c in checks]]
    for d in view.get("deliverables") or []:
        lines.append(f"  - deliverable: {_value(d)}")
    plan = view.get("oracle") or []
    lines += ["", f"Oracle plan ({len(plan)} call{'s' * (len(plan) != 1)})",
              *[f"  {i}. {_call(c)}" for i, c in enumerate(plan, 1)]]
    lines += ["", f"Budget: {view['budget']} steps"]
    if view.get("has_target_image"):
        lines.append(f"Target image: written to {image}" if image else
                     "Target image: yes (--image FILE saves it)")
    return "\n".join(lines)


def why_not_measured(metrics: dict[str, Any], a: Path, b: Path) -> dict[str, str]:
    """Why each metric that is None was not measured, in words."""
    why: dict[str, str] = {}
    for key, value in metrics.items():
        if value is not None:
            continue
        if key == "brep_iou":
            meshes = [p.name for p in (a, b) if p.suffix.lower() not in STEP_SUFFIXES]
            why[key] = (f"needs two exact CAD solids (STEP); {' and '.join(meshes)} "
                        f"{'is a mesh' if len(meshes) == 1 else 'are meshes'}")
        else:
            why[key] = "not measured for these files"
    return why


def _call(step: dict[str, Any]) -> str:
    tool = step.get("tool") or step.get("name", "?")
    args = step.get("args") or step.get("arguments") or {}
    return f"{tool}({', '.join(f'{k}={_value(v)}' for k, v in args.items())})"


def _constraint(c: dict[str, Any]) -> str:
    rest = {k: v for k, v in c.items() if k not in ("kind", "object")}
    head = f"{c.get('kind', '?')} of {c['object']}" if "object" in c else str(c.get("kind", "?"))
    return f"{head}: {', '.join(f'{k} {_value(v)}' for k, v in rest.items())}" if rest else head


def _value(v: Any, limit: int = 60) -> str:
    if isinstance(v, str) and "\n" in v:
        return f"<{v.count(chr(10)) + 1} lines of code>"
    if isinstance(v, float):
        return f"{v:g}"
    text = v if isinstance(v, str) else json.dumps(v)
    return text if len(text) <= limit else text[: limit - 1] + "…"
