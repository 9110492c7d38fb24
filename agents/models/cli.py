"""`modelwright models list|add|show|remove|export`: the models and adapters a policy can be named by.

Every command takes `--data-dir` (else MODELWRIGHT_DATA_DIR, else the platform default): the
registry lives in DATA/models (`agents/models/registry.py`). Errors are one line (`tools/cli/exits.py`):
2 for a name, file or folder the user got wrong, 3 when the packaged base's wheel is missing
or its file is not the pinned one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tools.text import printable

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", show_default=False,
                 help="Data folder (default: $MODELWRIGHT_DATA_DIR, else the platform's)."),
]
AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _echo(text: str) -> None:
    typer.echo(printable(text))


def _size(n: int) -> str:
    return f"{n / 1e6:.0f} MB" if n else "-"


def _shipped_note(adapter) -> str:
    if not adapter.shipped:
        return ""
    default = ", the Local agent's default" if adapter.default else ""
    return f"  (shipped{default}; measured: {adapter.report})"


def _variant_words(v: dict) -> str:
    """One variant as `models show` says it: engine, size and the speed measured here."""
    words = f"{v['variant']} ({v['engine']}"
    if v.get("size_bytes"):
        words += f" {v.get('quant', '')}, {_size(v['size_bytes'])}"
    if v.get("new_tok_s"):
        words += f", {v['new_tok_s']:g} new tok/s over {v.get('turns', 0)} turns here"
    if v.get("note"):
        words += f", {v['note']}"
    return words + ")"


def register(app: typer.Typer) -> None:
    models = typer.Typer(help="Models and adapters by name: the packaged base, GGUF files, "
                              "folders, hub-cache ids.", no_args_is_help=True)

    @models.command("list")
    def list_cmd(data_dir: DataDir = None, as_json: AsJson = False) -> None:
        """Models (name, kind, size on disk, source) and each one's adapters."""
        from agents.models.registry import list_adapters, list_models

        entries, adapters = list_models(data_dir), list_adapters(data_dir)
        if as_json:
            _echo(json.dumps({"models": [e.to_dict() for e in entries],
                              "adapters": [a.to_dict() for a in adapters]}))
            return
        for e in entries:
            note = f"  ({e.note})" if e.note else ""
            _echo(f"{e.name:28} {e.kind:6} {_size(e.size_bytes):>8}  {e.source}{note}")
            for a in adapters:
                if a.base_name == e.name:
                    _echo(f"  adapter {a.name:20} {a.path}{_shipped_note(a)}")
        for a in adapters:
            if a.base_name is None:
                _echo(f"adapter {a.name:20} {a.path}  (base {a.base or 'unknown'}, not registered)")

    @models.command("add")
    def add_cmd(
        source: str = typer.Argument(..., help="A .gguf file, a model folder, an org/name in "
                                                "the hub cache, or an adapter folder."),
        name: str = typer.Option(None, "--name", help="Name to use (default: from the source)."),
        adapter: bool = typer.Option(False, "--adapter", help="SOURCE is a LoRA adapter folder."),
        data_dir: DataDir = None,
    ) -> None:
        """Register a model or adapter. A GGUF is converted once into the data dir; folders
        and hub-cache ids are registered by reference. Nothing is downloaded."""
        from agents.models.registry import add

        entry = add(source, name=name, data_dir=data_dir, adapter=adapter)
        _echo(f"{entry.name}  {entry.path}")

    @models.command("show")
    def show_cmd(name: str = typer.Argument(..., help="A name from `models list`."),
                 data_dir: DataDir = None, as_json: AsJson = False) -> None:
        """Everything known about one model or adapter."""
        from agents.models.registry import show
        from agents.models.variants import variants_of

        info = show(name, data_dir)
        info["variants"] = variants_of(name, data_dir)
        if as_json:
            _echo(json.dumps(info))
            return
        for key, value in info.items():
            if key == "adapters":
                value = ", ".join(a["name"] for a in value) or "-"
            elif key == "variants":
                value = "; ".join(_variant_words(v) for v in value)
            elif isinstance(value, dict | list | tuple):
                value = json.dumps(value)
            _echo(f"{key:14} {value if value not in (None, '') else '-'}")

    @models.command("remove")
    def remove_cmd(name: str = typer.Argument(..., help="A name from `models list`."),
                   data_dir: DataDir = None) -> None:
        """Forget a model or adapter: a converted copy is deleted, a referenced folder only
        forgotten (its files stay)."""
        from agents.models.registry import remove

        _echo(remove(name, data_dir))

    @models.command("export")
    def export_cmd(
        name: str = typer.Argument(None, show_default=False,
                                   help="A model or adapter from `models list` (default: the "
                                        "Local agent, the shipped adapter on its base)."),
        adapter: str = typer.Option(None, "--adapter", show_default=False,
                                    help="A LoRA adapter folder or name to merge into NAME."),
        fmt: str = typer.Option("gguf", "--format", help="Only gguf for now."),
        quant: str = typer.Option("q8_0", "--quant",
                                  help="q8_0 | f16 | bf16 | f32 | q4_k_m | q4_0 (the 4-bit ones need "
                                       "the `fast` extra, llama-cpp-python: `make fast`)."),
        out: Path = typer.Option(None, "--out", show_default=False,
                                 help="Folder to write (default: DATA/exports/NAME-QUANT)."),
        data_dir: DataDir = None,
        as_json: AsJson = False,
    ) -> None:
        """Merge an adapter into its base and write a GGUF (with the tool-call chat template),
        an Ollama Modelfile and a README with the command for Ollama, LM Studio, llama.cpp."""
        from agents.models.export import export

        done = export(name, adapter=adapter, fmt=fmt, quant=quant, out=out, data_dir=data_dir)
        if as_json:
            _echo(json.dumps(done.to_dict()))
            return
        _echo(f"{done.gguf}  ({_size(done.size_bytes)}, {done.quant})")
        _echo(f"Ollama:  cd {Path(done.gguf).parent} && ollama create {done.name} -f Modelfile "
              f"&& ollama run {done.name}")

    app.add_typer(models, name="models")
