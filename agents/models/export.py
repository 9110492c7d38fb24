"""`modelwright models export`: an agent as one GGUF file that Ollama, LM Studio and llama.cpp run.

    OUT/<name>.<quant>.gguf   the base with the adapter merged in (peft merge_and_unload, in
                              float32), its tensors in llama.cpp's layout and quantised (q8_0
                              f16 or bf16 with gguf-py; q4_k_m through llama.cpp's own quantizer
                              when llama-cpp-python is installed); the base GGUF's metadata
                              (architecture, tokenizer) with the product's chat template
                              (`agents/models/chat_templates.py`: tools and `<tool_call>`)
    OUT/Modelfile             Ollama: FROM ./<file>, the same template in Go syntax, stop
                              tokens, temperature 0
    OUT/README.txt            the one command for Ollama, LM Studio and llama.cpp

The base must be a registered model that came from a llama-architecture GGUF (the packaged
base, or one added with `models add FILE.gguf`): its metadata, tokenizer included, is copied
from that file, whose pinned sha256 is checked first. The tensors come from the model folder
the `hf` policy loads, so the export holds the weights the standard variant runs.

torch, transformers, peft and gguf are imported inside functions.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from agents.models.convert import MANIFEST, ModelError, progress, sha256_of
from tools.cli.exits import ExitCode, Unavailable

FORMATS = ("gguf",)
GGUF_QUANTS = ("q8_0", "f16", "bf16", "f32")  # written by gguf-py
LLAMA_CPP_QUANTS = {"q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0"}  # its quantizer
QUANTS = GGUF_QUANTS + tuple(LLAMA_CPP_QUANTS)
STOP = ("<|im_end|>", "<|im_start|>")
MAX_EXPORT_BYTES = 64 << 30  # the outbox's cap for one file (its default, 1 GiB, is for renders)


class LlamaCppMissing(Unavailable):
    """A K-quant was asked for and llama-cpp-python (the `fast` extra) is not installed."""


@dataclass(frozen=True)
class Exported:
    name: str
    gguf: str
    quant: str
    size_bytes: int
    sha256: str
    base: str
    adapter: str | None
    modelfile: str
    readme: str

    def to_dict(self) -> dict:
        return asdict(self)


# -- which model and adapter ------------------------------------------------------------------
def pick(name: str | None, adapter: str | None,
         data_dir: str | os.PathLike[str] | None = None) -> tuple[str, Path | None, str]:
    """(base model name, adapter folder or None, export name) from what was named: nothing is
    the Local agent (the default shipped adapter on its base); NAME may be a model or an
    adapter `models list` shows; --adapter alone exports it on the base it belongs to."""
    from agents.models.registry import list_adapters, list_models, resolve_adapter
    from agents.models.shipped import default_shipped, is_shipped, verify

    if name is None and adapter is None:
        shipped = default_shipped()
        if shipped is None:
            raise ModelError("no model named and no shipped agent to export; name one from "
                             "`modelwright models list`")
        name, adapter = None, shipped.path
    models = {m.name for m in list_models(data_dir)}
    if name is not None and name not in models:
        if adapter is None and any(a.name == name for a in list_adapters(data_dir)):
            name, adapter = None, name  # an adapter's name: export it on its base
        else:
            raise ModelError(f"no model or adapter named {name!r}; see `modelwright models list`")
    folder = None
    if adapter is not None:
        folder = resolve_adapter(str(adapter), data_dir)
        belongs = None
        if is_shipped(folder):
            belongs = str(verify(folder).get("base") or "") or None
        else:
            from agents.models.files import check_adapter

            check_adapter(folder)
            belongs = _adapter_base(folder, data_dir)
        if name is None:
            if belongs is None:
                raise ModelError(f"the adapter {folder} names no registered base; pass its "
                                 "model's name: `modelwright models export NAME --adapter DIR`")
            name = belongs
        elif belongs is not None and belongs != name:
            raise ModelError(f"the adapter {folder.name} belongs to {belongs}, not {name}; "
                             f"leave out NAME (or name {belongs})")
    assert name is not None
    return name, folder, (folder.name if folder is not None else name)


def _adapter_base(folder: Path, data_dir) -> str | None:
    from agents.models.registry import list_adapters

    for entry in list_adapters(data_dir):
        if Path(entry.path).resolve() == folder.resolve() and entry.base_name:
            return entry.base_name
    try:
        written = json.loads((folder / "adapter_config.json").read_text())
    except (OSError, ValueError):
        return None
    base = str(written.get("base_model_name_or_path") or "")
    from agents.models.registry import BASE_NAME

    return BASE_NAME if base == BASE_NAME or Path(base).name == BASE_NAME else None


def source_gguf(name: str, folder: Path) -> Path:
    """The GGUF a registered model was converted from, checked against the hash its manifest
    recorded; ModelError when the model has none (a folder or hub model)."""
    from agents.models.convert import BASE_NAME, BASE_SHA256, packaged_gguf

    if name == BASE_NAME:
        gguf = packaged_gguf()
        expected = BASE_SHA256
    else:
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError):
            manifest = {}
        if not manifest.get("gguf"):
            raise ModelError(f"{name} did not come from a GGUF file, so there is no tokenizer "
                             "and architecture metadata to export with; export a model added "
                             "with `modelwright models add FILE.gguf` (or the packaged base), "
                             "or use llama.cpp's convert_hf_to_gguf.py on its folder")
        gguf, expected = Path(manifest["gguf"]), manifest.get("gguf_sha256")
        if not gguf.is_file():
            raise ModelError(f"{name} was converted from {gguf}, which is gone; add the GGUF "
                             "again to export it")
    digest = sha256_of(gguf)
    if expected and digest != expected:
        raise ModelError(f"{gguf} has sha256 {digest[:12]}, not the {str(expected)[:12]} "
                         f"recorded when {name} was converted: it changed since; add it again")
    return gguf


# -- the export ----------------------------------------------------------------------------------
def export(name: str | None = None, adapter: str | None = None, fmt: str = "gguf",
           quant: str = "q8_0", out: str | os.PathLike[str] | None = None,
           data_dir: str | os.PathLike[str] | None = None) -> Exported:
    if fmt not in FORMATS:
        raise ModelError(f"--format {fmt!r} is not one of: {', '.join(FORMATS)}")
    if quant not in QUANTS:
        raise ModelError(f"--quant {quant!r} is not one of: {', '.join(q for q in QUANTS)}")
    if quant in LLAMA_CPP_QUANTS:
        llama_cpp_quantizer(quant)  # before minutes of work: is llama.cpp's quantizer here?
    from agents.models.registry import resolve

    base, adapter_dir, label = pick(name, adapter, data_dir)
    folder = resolve(base, data_dir)
    if folder is None or not (folder / "config.json").is_file():
        raise ModelError(f"no model folder for {base}; see `modelwright models list`")
    gguf = source_gguf(base, folder)
    dest = Path(out).expanduser() if out is not None else _default_out(data_dir, label, quant)
    if dest.exists() and not dest.is_dir():
        raise ModelError(f"--out {dest} is a file; name a folder")
    file_name = f"{label}.{quant}.gguf"
    progress(f"merging {adapter_dir.name if adapter_dir else 'no adapter'} into {base}")
    weights = merged_tensors(folder, adapter_dir)
    from tools.trust.outbox import Outbox, OutboxError

    # Built in a private temp folder, then delivered into the person's folder by the outbox
    # (a fresh name, no link followed: tools/trust/outbox.py).
    tmp = Path(tempfile.mkdtemp(prefix="modelwright-export-"))
    try:
        if quant in LLAMA_CPP_QUANTS:
            write_gguf(gguf, weights, tmp / "f16.gguf", "f16", label)
            progress(f"quantising to {quant} with llama.cpp")
            quantize_llama_cpp(tmp / "f16.gguf", tmp / file_name, quant)
        else:
            progress(f"writing {file_name} ({quant})")
            write_gguf(gguf, weights, tmp / file_name, quant, label)
        digest, size = sha256_of(tmp / file_name), (tmp / file_name).stat().st_size
        outbox = Outbox(dest, max_bytes=MAX_EXPORT_BYTES)
        file = outbox.take(tmp, file_name)
        modelfile = outbox.save_text("Modelfile", ollama_modelfile(file_name))
        readme = outbox.save_text("README.txt", readme_text(label, file_name, base, adapter_dir))
    except OutboxError as exc:  # --out names a link, a FIFO, ...: one line
        raise ModelError(exc.message) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Exported(name=label, gguf=str(file), quant=quant, size_bytes=size,
                    sha256=digest, base=base,
                    adapter=str(adapter_dir) if adapter_dir else None,
                    modelfile=str(modelfile), readme=str(readme))


def _default_out(data_dir, label: str, quant: str) -> Path:
    from agents.models.registry import models_dir

    return models_dir(data_dir).parent / "exports" / f"{label}-{quant}"


@dataclass(frozen=True)
class Weights:
    tensors: dict  # transformers name -> float32 numpy array
    n_head: int
    n_head_kv: int


def merged_tensors(folder: Path, adapter: Path | None) -> Weights:
    """The base's weights with the LoRA merged in, float32 numpy arrays by transformers name."""
    import torch
    from transformers import AutoModelForCausalLM

    from agents.models.cpu import ThreadGovernor

    ThreadGovernor().apply()
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32,
                                                 local_files_only=True)
    if getattr(model.config, "model_type", None) != "llama":
        raise ModelError(f"{folder.name} is a {model.config.model_type} model; the GGUF "
                         "export writes llama-architecture models (SmolLM2, Llama)")
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    config = model.config
    tensors = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    return Weights(tensors, config.num_attention_heads,
                   config.num_key_value_heads or config.num_attention_heads)


# llama.cpp's tensor names for a transformers Llama (its convert_hf_to_gguf.py and gguf-py's
# tensor map): blk.N.<gguf> <- model.layers.N.<hf>.
LAYER_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm",
             "output": "lm_head"}


def hf_name(gguf_name: str) -> str:
    stem, _, suffix = gguf_name.rpartition(".")
    if stem.startswith("blk."):
        _, layer, part = stem.split(".", 2)
        if part in LAYER_NAMES:
            return f"model.layers.{layer}.{LAYER_NAMES[part]}.{suffix}"
    elif stem in TOP_NAMES:
        return f"{TOP_NAMES[stem]}.{suffix}"
    raise ModelError(f"the base GGUF holds a tensor {gguf_name} the export does not map; "
                     "only plain llama-architecture models are exported")


def permute(weights, n_head: int, n_head_kv: int | None = None):
    """llama.cpp's row order for q_proj/k_proj (convert_hf_to_gguf.py's LlamaModel.permute):
    the two rotary halves of each head interleaved. transformers' GGUF loader reverses it."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def write_gguf(template: Path, weights: Weights, dest: Path, quant: str, label: str) -> None:
    """A GGUF at `dest`: `template`'s metadata (less its name, file type and chat template)
    and tensor list, each tensor taken from `weights` (transformers names), 2-D ones in
    `quant`, q_proj/k_proj rows in llama.cpp's order."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, LlamaFileType
    from gguf.quants import quantize

    from agents.models.chat_templates import CHATML_TOOLS_JINJA

    reader = GGUFReader(str(template))
    arch = reader.fields["general.architecture"].contents()
    if arch != "llama":
        raise ModelError(f"{template.name} is a {arch} model; the export writes llama-architecture "
                         "models (SmolLM2, Llama)")
    tensors, n_head, n_head_kv = weights.tensors, weights.n_head, weights.n_head_kv
    qtype, ftype = {
        "q8_0": (GGMLQuantizationType.Q8_0, LlamaFileType.MOSTLY_Q8_0),
        "f16": (GGMLQuantizationType.F16, LlamaFileType.MOSTLY_F16),
        "bf16": (GGMLQuantizationType.BF16, LlamaFileType.MOSTLY_BF16),
        "f32": (GGMLQuantizationType.F32, LlamaFileType.ALL_F32),
    }[quant]
    skip = {"general.architecture", "general.file_type", "tokenizer.chat_template", "general.name"}
    writer = GGUFWriter(str(dest), arch=arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in skip:
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        if sub == GGUFValueType.ARRAY:
            raise ModelError(f"{template.name}: nested array {key} is not copied by the export")
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub)
    writer.add_name(label)
    writer.add_file_type(int(ftype))
    writer.add_chat_template(CHATML_TOOLS_JINJA)
    for info in reader.tensors:
        name = hf_name(info.name)
        if name not in tensors:
            raise ModelError(f"the model has no {name} for the GGUF tensor {info.name}")
        data = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if info.name.startswith("blk.") and ".attn_q." in info.name:
            data = permute(data, n_head, n_head)
        elif info.name.startswith("blk.") and ".attn_k." in info.name:
            data = permute(data, n_head, n_head_kv)
        if data.ndim == 1 or qtype == GGMLQuantizationType.F32:  # norms stay float32
            writer.add_tensor(info.name, np.ascontiguousarray(data, dtype=np.float32))
        elif qtype == GGMLQuantizationType.F16:
            writer.add_tensor(info.name, data.astype(np.float16))
        else:
            writer.add_tensor(info.name, quantize(data, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# -- llama.cpp's quantizer (the `fast` extra) -------------------------------------------------
def llama_cpp_quantizer(quant: str):
    try:
        import llama_cpp
    except ImportError:
        raise LlamaCppMissing(f"--quant {quant} needs llama.cpp's quantizer (the export writes "
                              "only q8_0, f16 and f32 itself): `make fast` builds "
                              "llama-cpp-python for this CPU, or export --quant f16 and run "
                              f"llama.cpp's llama-quantize FILE.gguf OUT.gguf {quant.upper()}"
                              ) from None
    return llama_cpp


def quantize_llama_cpp(src: Path, dest: Path, quant: str) -> None:
    llama_cpp = llama_cpp_quantizer(quant)
    ftype = getattr(llama_cpp, LLAMA_CPP_QUANTS[quant])
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = max(1, (os.cpu_count() or 1))
    code = llama_cpp.llama_model_quantize(str(src).encode(), str(dest).encode(), params)
    if code != 0 or not dest.is_file():
        raise ModelError(f"llama.cpp could not quantise {src.name} to {quant} (code {code})",
                         ExitCode.FAILED)


# -- what goes beside the file --------------------------------------------------------------------
def ollama_modelfile(gguf_name: str) -> str:
    from agents.models.chat_templates import CHATML_TOOLS_OLLAMA

    stops = "".join(f'PARAMETER stop "{s}"\n' for s in STOP)
    return (f"# Ollama: ollama create NAME -f Modelfile && ollama run NAME\n"
            f"FROM ./{gguf_name}\n"
            f'TEMPLATE """{CHATML_TOOLS_OLLAMA}"""\n'
            f"{stops}PARAMETER temperature 0\nPARAMETER num_ctx 4096\n")


def readme_text(label: str, gguf_name: str, base: str, adapter: Path | None) -> str:
    made = f"{base} with the adapter {adapter.name} merged in" if adapter else base
    return (
        f"{label}: {made}, exported by `modelwright models export`.\n"
        f"It writes tool calls as <tool_call>{{\"name\": ..., \"arguments\": {{...}}}}</tool_call>; "
        f"the file's chat template renders tools the way it was trained. Greedy decoding "
        f"(temperature 0) is what it was measured with.\n\n"
        f"Ollama:     ollama create {label} -f Modelfile && ollama run {label}\n"
        f"LM Studio:  lms import {gguf_name}   (then pick {label} in the app)\n"
        f"llama.cpp:  llama-server -m {gguf_name} --jinja --temp 0   "
        f"(OpenAI-compatible server with tools)\n"
    )
