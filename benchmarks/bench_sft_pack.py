"""SFT steps with `sft.pack` or `sft.share_prefix` (shared prefixes run once) against the same
rows apart (issue #49).

Run: .venv/bin/python benchmarks/bench_sft_pack.py [--data demos.parquet] [--steps 3] [--batch 4]

The packaged base in bfloat16 with the curriculum config's LoRA, on the curriculum's oracle
demonstrations (`--data`: a demos.parquet, e.g. a pipeline run's; without it, oracle episodes
of 4 families at levels 1-3 are run first, ~2 min). The batches are `pack_order`'s (each from
one family), the first `--steps` of them; each is trained once apart (the baseline: padded
rows, as `sft.pack: false` runs them) and once packed, alternately, forward and backward, no
optimiser step (both see the same weights). Per batch: row tokens, tokens the packed forward
ran, seconds each way, and the loss both ways. Ratios are against the first mode, load average
beside them. `single` and `shared` score through TRL's fused LM head (the scored positions
only), as SFT runs on a CPU; `shared` is `sft.share_prefix` (the batch's common prefix once,
then each row's own tokens alone). JSON at the end."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "pipeline-smollm2-curriculum.yaml"


def demos(out: Path) -> Path:
    from training.pipeline import base_folder, collect_demos
    from training.train_config import load_config

    config = load_config(CONFIG)
    spec = config.demos.model_copy(update={
        "families": ["primitive_placement", "materials", "scene_editing", "cad_parts"],
        "per_family": 3})  # fmt: skip
    config = config.model_copy(update={"demos": spec})
    collect_demos(config, out, base_folder(config, out))
    return out / "demos.parquet"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--modes", default="apart,unmasked,single,packed",
                    help="apart (one padded batch), unmasked (the same, padding left out of the "
                         "attention mask), single (each row alone), single_unmasked (each row alone, padded to --pad, "
                         "unmasked), packed, shared (sft.share_prefix)")
    ap.add_argument("--pad", type=int, default=64, help="pad_to_multiple_of")
    ap.add_argument("--trim", action="store_true",
                    help="hand the heap's free pages back before each batch, as SFT's steps do")
    args = ap.parse_args()

    import torch
    from peft import get_peft_model

    from training.runs import set_cpu_threads
    from training.sft.data import ConversationCollator, load_conversations
    from training.sft.packing import PrefixPacker, pack_order
    from training.sft.trainer import load_model, peft_config
    from training.train_config import load_config

    config = load_config(CONFIG)
    from training.runs import allocator_args, bound_allocator

    bound_allocator(**allocator_args(config.run))  # as the config's training sets it
    set_cpu_threads(config.run.cpu_threads)
    with tempfile.TemporaryDirectory() as tmp:
        data_path = args.data or demos(Path(tmp))
        data = load_conversations([str(data_path)])
        if "images" in data.column_names:
            data = data.remove_columns("images")
        rows = data.to_list()
        model, processor = load_model(config.model, Path(tmp))
    from trl.trainer.utils import add_fused_lm_head

    add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))  # as TRL's SFT
    model = get_peft_model(model, peft_config(config.lora))
    model.train()
    keys = [(str(r.get("task_id") or "").split(":")[0], str(r.get("episode_id") or i), i)
            for i, r in enumerate(rows)]  # fmt: skip
    order = pack_order(keys, args.batch, config.run.seed)
    collator = ConversationCollator(processor, pad_to_multiple_of=args.pad)
    unmasked = ConversationCollator(processor, pad_to_multiple_of=args.pad, mask_padding=False)
    plain = ConversationCollator(processor)  # single rows: no padding at all
    packer = PrefixPacker()
    from training.sft.shared_prefix import Counter, SharedPrefix

    counter = Counter()
    results = []
    load = [os.getloadavg()[0]]
    for step in range(args.steps):
        batch_rows = [rows[i] for i in order[step * args.batch : (step + 1) * args.batch]]
        batch = collator(batch_rows)
        one = {"rows": len(batch_rows), "family": keys[order[step * args.batch]][0],
               "row_tokens": int(batch["attention_mask"].sum())}  # fmt: skip
        for mode in args.modes.split(","):
            if args.trim:
                from training.runs import trim_heap

                trim_heap()
            handle = packer.attach(model) if mode == "packed" else None
            before = packer.tokens_run
            shared_before = counter.tokens_run
            model.zero_grad()
            start = time.perf_counter()
            if mode in ("single", "single_unmasked"):  # each row alone: attention runs causal
                each = plain if mode == "single" else unmasked  # no padding / padded, unmasked
                scored = sum(int((each([r])["labels"] != -100).sum()) for r in batch_rows)
                total = 0.0
                for r in batch_rows:
                    part = each([r])
                    loss = -model(**part, fused_lm_head=True).log_probs.sum() / scored
                    loss.backward()
                    total += float(loss.detach())
                value = total
            elif mode == "shared":  # sft.share_prefix: the common prefix once, rows alone after
                out = SharedPrefix(model, counter)(**dict(batch), fused_lm_head=True)
                loss = -out.log_probs.sum() / out.label_mask.sum()
                loss.backward()
                value = float(loss.detach())
                one["shared_tokens_run"] = counter.tokens_run - shared_before
            elif mode == "unmasked":  # the padded batch, its padding left unmasked
                loss = model(**unmasked(batch_rows)).loss
                loss.backward()
                value = float(loss.detach())
            else:
                loss = model(**dict(batch)).loss
                loss.backward()
                value = float(loss.detach())
            one[f"{mode}_s"] = round(time.perf_counter() - start, 2)
            one[f"{mode}_loss"] = round(value, 5)
            if handle is not None:
                handle.remove()
                one["tokens_run"] = packer.tokens_run - before
        if "apart_s" in one and "packed_s" in one:
            one["ratio"] = round(one["apart_s"] / one["packed_s"], 2)
        results.append(one)
        print(json.dumps(one), flush=True)
    load.append(os.getloadavg()[0])
    modes = args.modes.split(",")
    seconds = {m: round(sum(r[f"{m}_s"] for r in results), 1) for m in modes}
    summary = {
        "batches": len(results), "batch_rows": args.batch, "seconds": seconds,
        "row_tokens": sum(r["row_tokens"] for r in results),
        "tokens_run": sum(r.get("tokens_run", 0) for r in results),
        "ratios_vs_first": {m: round(seconds[modes[0]] / seconds[m], 2) for m in modes},
        "load_start_end": load, "torch_threads": torch.get_num_threads(),
    }  # fmt: skip
    print(", ".join(f"{m} {seconds[m]} s (x{summary['ratios_vs_first'][m]})" for m in modes)
          + f"; {summary['row_tokens']} row tokens; load {load[0]:.2f} -> {load[1]:.2f}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
