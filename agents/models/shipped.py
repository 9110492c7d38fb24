"""Adapters shipped with Modelwright: a LoRA adapter in the repository that the Local agent
uses by default, pinned by hash, with the eval that measured it.

    assets/agents/<name>/adapter_config.json       its base named by registry name
    assets/agents/<name>/adapter_model.safetensors
    assets/agents/<name>/report.json               the eval report that measured it
    assets/agents/<name>/manifest.json             each file's sha256, the base, the tools its
                                                   prompts showed, the measured table
    assets/agents/DEFAULT                          the name the Local agent uses (one line)

`ship` (scripts/ship_adapter.py) copies an adapter and its report in and writes the manifest;
`verify` checks every file against it before anything loads it (a changed, missing or added
file is one line naming it). `MODELWRIGHT_AGENTS_DIR` points at another folder of shipped
adapters (tests). Pure Python: no torch, transformers or peft.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agents.models.convert import BASE_NAME, BASE_SHA256, ModelError, now, sha256_of
from agents.models.files import check_adapter

ENV_VAR = "MODELWRIGHT_AGENTS_DIR"
MANIFEST = "manifest.json"
DEFAULT_FILE = "DEFAULT"
FORMAT = 1
SHIPPED_FILES = ("adapter_config.json", "adapter_model.safetensors", "report.json")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# What a tool lets the agent do, in a person's words (the Agent dock's "can do" line).
TOOL_WORDS = {"add_primitive": "add a primitive", "set_material": "set a material",
              "transform": "move", "delete": "delete", "duplicate": "duplicate",
              "cad_box": "make a CAD box", "cad_hole": "drill a CAD hole",
              "cad_revolve": "revolve a CAD profile", "cadquery_script": "run a CadQuery script",
              "boolean": "combine shapes", "modifier": "add a modifier"}
# The figures of a stage's eval (`training/eval/stats.py` stage_summary) kept in the manifest.
FIGURES = ("episodes", "valid_call_rate", "valid_call_rate_ci95", "success_rate",
           "success_rate_ci95", "mean_reward", "mean_reward_ci95")


def agents_dir() -> Path:
    """Where shipped adapters live: $MODELWRIGHT_AGENTS_DIR, else the repository's assets/agents."""
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override).expanduser()
    return Path(__file__).resolve().parents[2] / "assets" / "agents"


@dataclass(frozen=True)
class ShippedAdapter:
    name: str
    path: str  # the folder
    base: str  # the registered model it belongs to (the packaged base)
    tools: list[str] = field(default_factory=list)  # the tools its prompts showed
    # toolboxes a free-form goal's words choose instead of `tools` ({"name", "words", "tools"})
    toolboxes: list[dict] = field(default_factory=list)
    report: str | None = None  # the eval report that measured it
    measured: dict = field(default_factory=dict)
    default: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    def can_do(self) -> str:
        """What it can do, in one sentence for the Agent dock."""
        return capability(self.tools, self.measured, self.toolboxes)

    def tools_for(self, goal: str) -> list[str]:
        """The tools a free-form `goal` is shown with (`tools_for_goal`)."""
        return tools_for_goal(goal, self.tools, self.toolboxes)


# a quoted name ('Block', "Plate"), not an apostrophe (I'd, it's)
QUOTED = re.compile(r"(?<![A-Za-z])('[^']*'|\"[^\"]*\"|‘[^’]*’|“[^”]*”)(?![A-Za-z])")


def tools_for_goal(goal: str, tools: list[str], toolboxes: list[dict] | None) -> list[str]:
    """The first of `toolboxes` one of whose `words` the goal uses (as a word, any case,
    digits apart: "a 6mm hole" uses "hole"; quoted names left out), else `tools`. The rule never sees
    a solution: a shipped adapter keeps it for goals with no task (training/tasks/toolbox.py
    `goal_toolboxes`)."""
    if not toolboxes or not goal:
        return list(tools)
    used = set(re.findall(r"[a-z]+", QUOTED.sub(" ", goal).lower()))
    for box in toolboxes:
        words = box.get("words") if isinstance(box, dict) else None
        chosen = box.get("tools") if isinstance(box, dict) else None
        if isinstance(words, list) and isinstance(chosen, list) and chosen and used & {
                str(w).lower() for w in words}:
            return [str(t) for t in chosen]
    return list(tools)


def goal_tools_of(task_info: dict | None, tools: list[str] | None,
                  toolboxes: list[dict] | None) -> list[str] | None:
    """A policy's tools for an episode when none are configured: the task's toolbox, else (a
    person's goal, handed over as {"goal": text}) the toolbox its words choose, else None
    (the policy's `goal_tools`)."""
    chosen = (task_info or {}).get("tools")
    if chosen is None and toolboxes:
        chosen = tools_for_goal(str((task_info or {}).get("goal") or ""), tools or [],
                                toolboxes) or None
    return chosen


def capability(tools: list[str], measured: dict, toolboxes: list[dict] | None = None) -> str:
    """"one-call edits: add a primitive, set a material, move, delete; 97 % of its 60 test
    tasks solved" from a manifest's tools and measured figures."""
    levels = measured.get("levels") or []
    kind = "one-call edits" if levels == [1] else "edits"
    words = ", ".join(TOOL_WORDS.get(t, t.replace("_", " ")) for t in tools) or "no tools"
    text = f"{kind}: {words}"
    for box in toolboxes or []:
        if isinstance(box, dict) and box.get("name"):
            text += f" ({box['name']} goals: its {box['name']} tools)"
    rate, n = measured.get("success_rate"), measured.get("episodes")
    if isinstance(rate, int | float) and n:
        split = measured.get("split") or "test"
        text += f"; ~{100 * rate:.0f} % of its {n} {split} tasks solved"
        families = measured.get("families")
        if families:
            text += f" ({', '.join(families)}" + (f", level {levels[0]}" if len(levels) == 1
                                                   else "") + ")"
    return text


def list_shipped(root: Path | None = None) -> list[ShippedAdapter]:
    """Every folder of `root` (default `agents_dir()`) with a manifest; unreadable manifests
    are left out here (loading one says what is wrong)."""
    root = agents_dir() if root is None else Path(root)
    if not root.is_dir():
        return []
    default = _default_name(root)
    found = []
    for manifest in sorted(root.glob(f"*/{MANIFEST}")):
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
            continue
        folder = manifest.parent
        report = data.get("report")
        found.append(ShippedAdapter(
            name=folder.name, path=str(folder), base=str(data.get("base") or BASE_NAME),
            tools=[str(t) for t in data.get("tools") or []],
            toolboxes=[b for b in data.get("toolboxes") or [] if isinstance(b, dict)],
            report=str(folder / report) if isinstance(report, str) else None,
            measured=data.get("measured") if isinstance(data.get("measured"), dict) else {},
            default=folder.name == default))
    return found


def default_shipped(root: Path | None = None) -> ShippedAdapter | None:
    """The adapter the Local agent uses when no model is named, or None (the bare base)."""
    return next((s for s in list_shipped(root) if s.default), None)


def shipped_at(text: str) -> ShippedAdapter | None:
    """The shipped adapter `text` names (its name or its folder), or None."""
    if not text:
        return None
    try:
        folder = Path(text).expanduser().resolve()
    except (OSError, ValueError, RuntimeError):
        folder = None
    for shipped in list_shipped():
        if text == shipped.name or (folder is not None
                                    and Path(shipped.path).resolve() == folder):
            return shipped
    return None


def _default_name(root: Path) -> str | None:
    try:
        name = (root / DEFAULT_FILE).read_text().strip()
    except OSError:
        return None
    return name if NAME.fullmatch(name) else None


def is_shipped(folder: str | os.PathLike[str]) -> bool:
    return (Path(folder) / MANIFEST).is_file()


def verify(folder: str | os.PathLike[str]) -> dict:
    """The manifest of a shipped adapter folder whose every file is the one it pins;
    ModelError (one line, naming the file) for a changed, missing or added file."""
    folder = Path(folder)
    where = f"the shipped agent {folder.name}"
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except OSError as exc:
        raise ModelError(f"{folder / MANIFEST}: {exc.strerror or exc}; {where} is incomplete"
                         ) from None
    except ValueError:
        raise ModelError(f"{folder / MANIFEST} is not JSON; {where} is damaged: ship it again "
                         "with scripts/ship_adapter.py") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not files:
        raise ModelError(f"{folder / MANIFEST} pins no files; ship it again with "
                         "scripts/ship_adapter.py")
    present = {p.name for p in folder.iterdir() if p.name != MANIFEST}
    for extra in sorted(present - set(files)):
        raise ModelError(f"{folder / extra} is not one of the files {where} pins; remove it "
                         "(or ship the adapter again with scripts/ship_adapter.py)")
    for name, expected in sorted(files.items()):
        path = folder / name
        if "/" in name or not path.is_file():
            raise ModelError(f"{path} is missing: {where} is incomplete; restore it (git "
                             "checkout) or ship it again with scripts/ship_adapter.py")
        digest = sha256_of(path)
        if digest != expected:
            raise ModelError(f"{path} has sha256 {digest[:12]}, not the {str(expected)[:12]} "
                             f"pinned in its manifest: {where} was changed or damaged; restore "
                             "it (git checkout) or ship it again (scripts/ship_adapter.py)")
    check_adapter(folder)  # the structure, as for any adapter someone else made
    return manifest


# -- shipping ----------------------------------------------------------------------------------
def ship(source: str | os.PathLike[str], report: str | os.PathLike[str] | None, name: str,
         dest: str | os.PathLike[str] | None = None, tools: list[str] | None = None,
         base: str | None = None, stage: str | None = None,
         make_default: bool = True, toolboxes: list[dict] | None = None,
         per_family: dict | None = None) -> ShippedAdapter:
    """Copy the adapter at `source` and its eval `report` into DEST/NAME, pinned by a manifest.

    `source` is an adapter folder (adapter_config.json) or the run folder of `modelwright train
    pipeline` (then its GRPO adapter, or `stage`'s: sft | grpo, and OUT/report.json); `tools`
    defaults to the `tools:` of the run's config beside the adapter; `base` to the registered
    model the adapter was trained on (the packaged base when its config names that folder);
    `toolboxes`: the ones a free-form goal's words choose instead of `tools` (`tools_for_goal`).
    `per_family` ({"tools", "toolboxes"}) is used when neither `tools` nor the run's config
    names a list: a run whose prompts each showed their family's toolbox (the curriculum)."""
    if not NAME.fullmatch(name):
        raise ModelError(f"{name!r} is not a name: letters, digits, '.', '_' and '-'")
    adapter, report_path, stage = _locate(Path(source).expanduser(), report, stage)
    check_adapter(adapter)
    weights = adapter / "adapter_model.safetensors"
    if not weights.is_file():
        raise ModelError(f"{adapter} has no adapter_model.safetensors; ship a PEFT adapter "
                         "saved with safetensors")
    try:
        report_data = json.loads(report_path.read_text())
    except OSError as exc:
        raise ModelError(f"{report_path}: {exc.strerror or exc}") from None
    except ValueError:
        raise ModelError(f"{report_path} is not JSON; pass the report.json of the pipeline or "
                         "an eval report (`modelwright eval --json FILE`)") from None
    measured = measured_from(report_data, stage)
    tools = list(tools) if tools else _run_tools(adapter)
    if not tools and per_family:
        tools, toolboxes = list(per_family.get("tools") or []), per_family.get("toolboxes")
    if not tools:
        raise ModelError(f"no `tools:` list found for {adapter} (none in the run's config); "
                         "pass --tools add_primitive,set_material,... as its prompts showed them")
    config = json.loads((adapter / "adapter_config.json").read_text())
    base = base or _base_name(str(config.get("base_model_name_or_path") or ""))
    config["base_model_name_or_path"] = base  # a name, not the trainer's own folder
    root = agents_dir() if dest is None else Path(dest)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        os.chmod(tmp, 0o755)
        (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        shutil.copyfile(weights, tmp / "adapter_model.safetensors")
        shutil.copyfile(report_path, tmp / "report.json")
        manifest = {
            "format": FORMAT, "name": name, "kind": "lora-adapter", "base": base,
            **({"base_sha256": BASE_SHA256} if base == BASE_NAME else {}),
            "tools": tools, **({"toolboxes": list(toolboxes)} if toolboxes else {}),
            "report": "report.json", "measured": measured,
            "files": {f: sha256_of(tmp / f) for f in SHIPPED_FILES},
            "source": {"adapter": str(adapter.resolve()), "report": str(report_path.resolve())},
            "created": now(),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        folder = root / name
        if folder.exists():
            shutil.rmtree(folder)
        os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if make_default:
        (root / DEFAULT_FILE).write_text(name + "\n")
    verify(folder)
    return next(s for s in list_shipped(root) if s.name == name)


def _locate(source: Path, report: str | os.PathLike[str] | None, stage: str | None
            ) -> tuple[Path, Path, str | None]:
    """(adapter folder, report file, stage) from what was named."""
    if not source.is_dir():
        raise ModelError(f"no folder at {source}; name an adapter folder (with "
                         "adapter_config.json) or a `modelwright train pipeline` run folder")
    if (source / "adapter_config.json").is_file():
        adapter = source
        if report is None:  # RUN/sft/adapter -> RUN/report.json
            near = [p / "report.json" for p in (source.parent, source.parent.parent)]
            found = next((p for p in near if p.is_file()), None)
            if found is None:
                raise ModelError(f"no report for {source}: pass the eval report that measured "
                                 "it (the pipeline's report.json or `modelwright eval --json`)")
            report = found
        if stage is None and source.name == "adapter" and source.parent.name in ("sft", "grpo"):
            stage = source.parent.name
    else:  # a pipeline's run folder
        stage = stage or "grpo"
        adapter = source / stage / "adapter"
        if not (adapter / "adapter_config.json").is_file():
            raise ModelError(f"{source} is neither an adapter folder nor a pipeline run with "
                             f"{stage}/adapter; name the adapter folder itself")
        report = report if report is not None else source / "report.json"
    return adapter, Path(report).expanduser(), stage


def measured_from(report: dict, stage: str | None = None) -> dict:
    """The shipped stage's figures and the whole table, from the pipeline's report.json
    (`stages`: untrained, sft, grpo) or an eval report (`overall`)."""
    if isinstance(report.get("stages"), dict) and report["stages"]:
        stages = report["stages"]
        stage = stage if stage in stages else ("grpo" if "grpo" in stages else list(stages)[-1])
        held = report.get("held_out") or {}
        table = [{"stage": name, **{k: v.get(k) for k in FIGURES if k in v}}
                 for name, v in stages.items() if isinstance(v, dict)]
        chosen = stages[stage] if isinstance(stages[stage], dict) else {}
        return {"stage": stage, "split": held.get("split"), "families": held.get("families"),
                "levels": held.get("levels"),
                **{k: chosen.get(k) for k in FIGURES if k in chosen}, "table": table}
    overall = report.get("overall")
    if isinstance(overall, dict):
        figures = {"episodes": overall.get("episodes"), "success_rate": overall.get("success_rate"),
                   "mean_reward": overall.get("mean_reward")}
        families = sorted(report.get("families") or {})
        return {"stage": stage or "eval", "split": report.get("split"),
                "families": families or None, "levels": report.get("levels"), **figures,
                "table": [{"stage": stage or "eval", **figures}]}
    raise ModelError("the report holds neither the pipeline's `stages` nor an eval's `overall`: "
                     "pass the pipeline's report.json or `modelwright eval --json FILE`'s")


def _run_tools(adapter: Path) -> list[str]:
    """The `tools:` of the run's config beside the adapter (RUN/config.yaml, or the pipeline's
    OUT/sft/config.yaml), which the prompts it was trained on showed."""
    import yaml

    for folder in (adapter.parent, adapter.parent.parent, adapter.parent.parent / "sft",
                   adapter.parent.parent / "grpo"):
        for name in ("config.yaml", "config.yml"):
            try:
                data = yaml.safe_load((folder / name).read_text())
            except (OSError, yaml.YAMLError):
                continue
            if isinstance(data, dict) and isinstance(data.get("tools"), list):
                return [str(t) for t in data["tools"]]
    return []


def _base_name(written: str) -> str:
    """The registered name of the base an adapter's config names (the trainer's folder of the
    packaged base ends in its name); the text as written otherwise."""
    if not written:
        return BASE_NAME
    if written == BASE_NAME or Path(written).name == BASE_NAME:
        return BASE_NAME
    return written
