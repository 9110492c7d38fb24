"""Command lines for multi-GPU and multi-node runs, rendered from a training config.

We do not write a distributed engine: `accelerate launch` (FSDP or DeepSpeed configs in
`configs/accelerate/`) runs `modelwright train ...` on every process, and in vLLM server mode
a separate `modelwright serve` (vLLM) process generates rollouts on its own GPUs.

Multi-node: run the same `accelerate launch` line on every machine with its own
`--machine_rank` (0 on the main one, whose address is `--main_process_ip`); the vLLM server
runs once, on a GPU the trainers do not use, and `grpo.server_url` points at it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from training.train_config import TrainConfig


def vllm_server_command(
    config: TrainConfig, tensor_parallel: int = 1, gpus: str | None = None
) -> list[str]:
    """`modelwright serve` (vLLM, LoRA slots on) for GRPO's server mode; [] otherwise. The
    trainer hot-loads its adapter into it after every step (`training/rl/grpo_server.py`)."""
    from urllib.parse import urlparse

    spec = config.grpo
    if config.kind != "grpo" or spec.generation != "server":
        return []
    if tensor_parallel != 1:  # said, not dropped: vLLM would run on one of the GPUs given
        raise ValueError(
            f"--tensor-parallel {tensor_parallel}: `modelwright serve` has no tensor-parallel "
            "option yet (vLLM runs on one GPU); use one GPU for the rollout server, or start "
            "`vllm serve ... --tensor-parallel-size N` yourself at grpo.server_url"
        )
    cmd = []
    if gpus:
        cmd += ["env", f"CUDA_VISIBLE_DEVICES={gpus}"]
    port = urlparse(spec.server_url).port or 8000
    cmd += ["modelwright", "serve", "--model", config.model.path or "", "--host", "0.0.0.0",
            "--port", str(port), "--lora", "--max-lora-rank", str(config.lora.r)]  # fmt: skip
    return cmd


def train_command(
    config: TrainConfig,
    config_path: str | Path,
    out: str | Path | None = None,
    machine_rank: int = 0,
    resume: bool = True,
) -> list[str]:
    """`accelerate launch ... -m studio.cli train KIND --config F` for this machine."""
    acc = config.accelerate
    cmd = ["accelerate", "launch"]
    if acc is not None:
        if acc.config_file:
            cmd += ["--config_file", acc.config_file]
        cmd += [
            "--num_machines",
            str(acc.num_machines),
            "--num_processes",
            str(acc.num_processes),
            "--machine_rank",
            str(machine_rank),
        ]
        if acc.num_machines > 1:
            if not acc.main_process_ip:
                raise ValueError("accelerate.main_process_ip: required when num_machines > 1")
            cmd += [
                "--main_process_ip",
                acc.main_process_ip,
                "--main_process_port",
                str(acc.main_process_port),
            ]
    cmd += ["-m", "studio.cli", "train", config.kind, "--config", str(config_path)]
    if out is not None:
        cmd += ["--out", str(out)]
    if resume:
        cmd.append("--resume")  # a relaunched job continues from its last checkpoint
    return cmd


def render(cmd: list[str]) -> str:
    return shlex.join(cmd)
