"""Command lines for multi-GPU and multi-node runs, rendered from a training config.

We do not write a distributed engine: `accelerate launch` (FSDP or DeepSpeed configs in
`configs/accelerate/`) runs `modelwright train ...` on every process, and in vLLM server mode
a separate `trl vllm-serve` process generates rollouts on its own GPUs.

Multi-node: run the same `accelerate launch` line on every machine with its own
`--machine_rank` (0 on the main one, whose address is `--main_process_ip`); the vLLM server
runs once, on a GPU the trainers do not use, and `grpo.vllm_server_host` points at it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from training.train_config import TrainConfig


def vllm_server_command(
    config: TrainConfig, tensor_parallel: int = 1, gpus: str | None = None
) -> list[str]:
    """`trl vllm-serve` for GRPO's server mode (None when generation is not vllm_server)."""
    spec = config.grpo
    if config.kind != "grpo" or spec.generation != "vllm_server":
        return []
    cmd = []
    if gpus:
        cmd += ["env", f"CUDA_VISIBLE_DEVICES={gpus}"]
    cmd += [
        "trl",
        "vllm-serve",
        "--model",
        config.model.path or "",
        "--host",
        "0.0.0.0",
        "--port",
        str(spec.vllm_server_port),
        "--tensor-parallel-size",
        str(tensor_parallel),
        "--gpu-memory-utilization",
        str(spec.vllm_gpu_memory_utilization),
    ]
    if config.model.dtype != "auto":
        cmd += ["--dtype", config.model.dtype]
    # No LoRA flags: TRL merges the adapter and pushes full weights to the server each step.
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
