"""A screenshot of the studio's Agent dock driven by a local model (hf policy), optionally with a
LoRA adapter on it: what `modelwright studio --task ID --policy hf:NAME --autorun --screenshot`
does, plus the adapter, which that command does not take.

    xvfb-run -a .venv/bin/python scripts/studio_turn_screenshot.py primitive_placement:1:110000 \
        assets/screenshots/real-base-turn.png [--model smollm2-135m-instruct] [--adapter DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("screenshot", type=Path)
    parser.add_argument("--model", default="smollm2-135m-instruct", help="registered name or folder")
    parser.add_argument("--adapter", default="", help="LoRA adapter folder on that model")
    parser.add_argument("--max-steps", type=int, default=2, help="agent turns (0: the task's budget)")
    parser.add_argument("--max-tokens", type=int, default=96, help="new tokens per turn (as eval)")
    parser.add_argument("--data-dir", default=None, help="store and models (default: the usual one)")
    parser.add_argument("--size", default="1500x950")
    args = parser.parse_args()

    from PySide6.QtWidgets import QApplication

    from studio.app import ScriptedRun, StudioOptions, build

    app = QApplication(sys.argv[:1])
    settings = Path(tempfile.mkdtemp(prefix="mw-shot-")) / "settings.ini"  # the person's stay as they are
    width, height = (int(v) for v in args.size.split("x"))
    options = StudioOptions(task=args.task, policy="hf", autorun=True, exit_when_done=True,
                            screenshot=args.screenshot, data_dir=args.data_dir,
                            settings_file=str(settings), size=(width, height))
    window, _ = build(options)
    agent = window.agent  # the run reads these fields, as a person's Run would
    agent.model.setText(args.model)
    agent.adapter.setText(args.adapter)
    agent.max_steps.setValue(args.max_steps)

    class Run(ScriptedRun):
        def _task_ready(self, task) -> None:  # the dock's own request, with a turn's token cap
            agent.policy.setCurrentText("hf")
            agent.use_task.setChecked(True)
            agent.approval.setChecked(False)  # nobody is there to answer
            request = agent.request()
            request.options = {**request.options, "max_tokens": args.max_tokens}
            agent.run(request)

    run = Run(window, options)
    window.show()
    code = app.exec()
    return run.exit_code if code == 0 else code


if __name__ == "__main__":
    raise SystemExit(main())
