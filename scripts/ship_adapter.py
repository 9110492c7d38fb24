"""Ship a trained LoRA adapter with Modelwright: copy it and the eval report that measured it
into assets/agents/NAME/, pin every file by sha256 in a manifest with its base, the tools its
prompts showed and the measured table, and make it the Local agent's default.

    .venv/bin/python scripts/ship_adapter.py runs/smollm2/grpo/adapter runs/smollm2/report.json \
        --name smollm2-level1
    .venv/bin/python scripts/ship_adapter.py runs/smollm2 --name smollm2-level1   # a pipeline run:
        its GRPO adapter (--stage sft for SFT's) and OUT/report.json

The tools default to the `tools:` of the run's config (RUN/config.yaml, the pipeline's
OUT/sft/config.yaml); a run with none (the curriculum: each task showed its family's toolbox)
ships the rule for a person's goal, which has no family: the scene toolbox, or the CAD one for
a goal in a CAD part's words (training/tasks/toolbox.py `goal_toolboxes`). The base defaults
to the registered model the adapter was trained on. Afterwards: `modelwright models list`
shows it on its base, the studio's Local agent and `modelwright run --policy hf` use it, and
tests/test_studio_shipped_xvfb.py runs with it. Commit the folder (git add assets/agents/NAME
assets/agents/DEFAULT).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path,
                        help="an adapter folder (adapter_config.json) or a pipeline run folder")
    parser.add_argument("report", type=Path, nargs="?", default=None,
                        help="the eval report that measured it (default: the run's report.json)")
    parser.add_argument("--name", required=True, help="its name in assets/agents/")
    parser.add_argument("--stage", choices=("sft", "grpo"), default=None,
                        help="a pipeline run's adapter to ship (default: grpo)")
    parser.add_argument("--tools", default=None,
                        help="comma-separated tools its prompts showed (default: the run's config)")
    parser.add_argument("--base", default=None,
                        help="the registered model it belongs to (default: from its config)")
    parser.add_argument("--dest", type=Path, default=None,
                        help="folder of shipped adapters (default: assets/agents)")
    parser.add_argument("--no-default", action="store_true",
                        help="ship it without making it the Local agent's default")
    args = parser.parse_args(argv)

    from agents.models.shipped import ship
    from tools.cli.exits import UserError, one_line
    from training.tasks.toolbox import goal_toolboxes

    tools = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools else None
    try:
        shipped = ship(args.source, args.report, args.name, dest=args.dest, tools=tools,
                       base=args.base, stage=args.stage, make_default=not args.no_default,
                       per_family=goal_toolboxes())
    except UserError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return int(exc.exit_code)
    default = " (the Local agent's default)" if shipped.default else ""
    print(f"shipped {shipped.name} on {shipped.base}{default}: {shipped.path}")
    print(f"  can do {shipped.can_do()}")
    print(f"  tools shown: {', '.join(shipped.tools)}; measured by {shipped.report}")
    for box in shipped.toolboxes:
        print(f"  a goal in its {box['name']} words shows: {', '.join(box['tools'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
