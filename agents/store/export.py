"""Export episodes to Parquet that `datasets.load_dataset("parquet", ...)` loads as TRL
conversational data, plus a per-step table with full fidelity (and what `data import` reads).

    OUT/episodes.parquet   one row per episode: messages, images, tools (JSON string of OpenAI
                           tools), reward, components (JSON string), success, task, source, ...
    OUT/steps.parquet      one row per step: tool, arguments (JSON string), result, error,
                           frame (PNG), scene hash, model message, tokens, token ids, log-probs
    OUT/manifest.json      format version, filters, counts, the tool specs by version

Files are written into a hidden temp folder inside OUT and renamed into place only when the
whole export succeeded, so a failed export leaves OUT as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agents.store.atomic import TEMP_MARK, fsync_dir
from agents.store.conversation import episode_conversation, openai_tools
from agents.store.errors import ExportError
from agents.store.models import EpisodeFilter

if TYPE_CHECKING:
    from agents.store.store import Store

EXPORT_FORMAT = "modelwright-trajectories"
EXPORT_VERSION = 1
FORMATS = ("parquet",)
ROWS_PER_GROUP = 64


@dataclass(frozen=True)
class ExportReport:
    out: str
    episodes: int
    steps: int
    images: int
    seconds: float
    files: list[str]


def _schemas():
    import pyarrow as pa

    s, f64, i64 = pa.string(), pa.float64(), pa.int64()
    image = pa.struct([("bytes", pa.binary()), ("path", s)])
    part = pa.struct([("type", s), ("text", s)])
    call = pa.struct([("type", s), ("function", pa.struct([("name", s), ("arguments", s)]))])
    msg = pa.struct([("role", s), ("content", pa.list_(part)), ("tool_calls", pa.list_(call))])
    episodes = pa.schema(
        [
            ("episode_id", s),
            ("messages", pa.list_(msg)),
            ("images", pa.list_(image)),
            ("tools", s),
            ("reward", f64),
            ("components", s),
            ("success", pa.bool_()),
            ("task", s),
            ("task_family", s),
            ("task_level", i64),
            ("task_seed", i64),
            ("task_params", s),
            ("source", s),
            ("policy", s),
            ("model", s),
            ("adapter", s),
            ("status", s),
            ("created_at", f64),
            ("n_steps", i64),
            ("n_errors", i64),
            ("tokens_in", i64),
            ("tokens_out", i64),
            ("meta", s),
        ]
    )
    steps = pa.schema(
        [
            ("episode_id", s),
            ("index", i64),
            ("turn", i64),
            ("at", f64),
            ("tool", s),
            ("arguments", s),
            ("result", s),
            ("result_text", s),
            ("error_kind", s),
            ("error_message", s),
            ("duration_ms", f64),
            ("frame", image),
            ("scene_hash", s),
            ("model_message", s),
            ("tokens_in", i64),
            ("tokens_out", i64),
            ("latency_ms", f64),
            ("token_ids", pa.list_(i64)),
            ("logprobs", pa.list_(f64)),
            ("actor", s),
        ]
    )
    return _with_hf_features(episodes), _with_hf_features(steps)


def _feature(t) -> dict:
    """The Hugging Face `datasets` feature for an Arrow type; {bytes, path} structs are images."""
    import pyarrow as pa

    if pa.types.is_list(t):
        return {"feature": _feature(t.value_type), "_type": "List"}
    if pa.types.is_struct(t):
        names = [t.field(i).name for i in range(t.num_fields)]
        if names == ["bytes", "path"]:
            return {"_type": "Image"}
        return {n: _feature(t.field(n).type) for n in names}
    dtype = {"string": "string", "double": "float64", "int64": "int64", "bool": "bool"}[str(t)]
    return {"dtype": dtype, "_type": "Value"}


def _with_hf_features(schema):
    features = {name: _feature(schema.field(name).type) for name in schema.names}
    return schema.with_metadata({"huggingface": json.dumps({"info": {"features": features}})})


def _image(data: bytes | None) -> dict | None:
    return None if data is None else {"bytes": data, "path": None}


def _frame_reader(store: Store, episode_id: str) -> Callable[[str, str | None], bytes]:
    """Reads (and verifies) each frame of an episode once, for both tables."""
    read: dict[str, bytes] = {}

    def frame(rel: str, sha: str | None) -> bytes:
        if rel not in read:
            read[rel] = store.frame(episode_id, rel, sha)
        return read[rel]

    return frame


def export_parquet(
    store: Store,
    out: Path,
    where: EpisodeFilter | None = None,
    *,
    include_interrupted: bool = False,
    include_untasked: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ExportReport:
    """Export the finished episodes matching `where` (and interrupted ones if asked) to `out`.
    An episode with neither a task nor a goal (a session nobody said the aim of) teaches
    nothing: left out unless `include_untasked`, or unless `where.ids` names the episodes
    (the caller chose them one by one)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    where = where or EpisodeFilter()
    if not include_interrupted and where.status is None:
        where = replace(where, status="finished")  # in SQL, so that --limit counts exported ones
    if not include_untasked and where.aimed is None and where.ids is None:
        where = replace(where, aimed=True)  # in SQL too
    episodes = [
        e
        for e in store.list_episodes(where)
        if e.status == "finished" or (include_interrupted and e.status == "interrupted")
    ]
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / f"{TEMP_MARK}export-{os.getpid()}-{time.time_ns()}"
        tmp.mkdir()
    except OSError as exc:
        raise ExportError(
            f"cannot write the export to {out}: {exc.strerror or exc}; choose a "
            f"folder you can write to with --out"
        ) from exc
    ep_schema, step_schema = _schemas()
    n_steps = n_images = 0
    specs: dict[str, list[dict] | None] = {}
    try:
        with (
            pq.ParquetWriter(tmp / "episodes.parquet", ep_schema) as ep_writer,
            pq.ParquetWriter(tmp / "steps.parquet", step_schema) as step_writer,
        ):
            ep_rows: list[dict] = []
            step_rows: list[dict] = []
            for k, ep in enumerate(episodes):
                steps = store.steps(ep.id)
                if ep.tools_version not in specs:
                    specs[ep.tools_version] = store.tool_specs(ep.tools_version)
                frame = _frame_reader(store, ep.id)

                messages, images = episode_conversation(ep, steps, frame)
                n_images += len(images)
                ep_rows.append(
                    {
                        "episode_id": ep.id,
                        "messages": messages,
                        "images": [_image(b) for b in images],
                        "tools": json.dumps(openai_tools(specs[ep.tools_version])),
                        "reward": ep.reward,
                        "components": None if ep.components is None else json.dumps(ep.components),
                        "success": ep.success,
                        "task": ep.task_id,
                        "task_family": ep.task_family,
                        "task_level": ep.task_level,
                        "task_seed": ep.task_seed,
                        "task_params": None
                        if ep.task_params is None
                        else json.dumps(ep.task_params),
                        "source": ep.source,
                        "policy": ep.policy,
                        "model": ep.model,
                        "adapter": ep.adapter,
                        "status": ep.status,
                        "created_at": ep.created_at,
                        "n_steps": ep.n_steps,
                        "n_errors": ep.n_errors,
                        "tokens_in": ep.tokens_in,
                        "tokens_out": ep.tokens_out,
                        "meta": json.dumps(ep.to_dict()),
                    }
                )
                for st in steps:
                    row = asdict(st)
                    row["arguments"] = json.dumps(row.pop("args"), ensure_ascii=False)
                    row["result"] = None if st.result is None else json.dumps(st.result)
                    row["frame"] = _image(
                        None if st.frame is None else frame(st.frame, st.frame_sha256)
                    )
                    row.pop("frame_sha256")
                    step_rows.append(row)
                n_steps += len(steps)
                if len(ep_rows) >= ROWS_PER_GROUP or k == len(episodes) - 1:
                    ep_writer.write_table(pa.Table.from_pylist(ep_rows, schema=ep_schema))
                    step_writer.write_table(pa.Table.from_pylist(step_rows, schema=step_schema))
                    ep_rows, step_rows = [], []
                if progress is not None:
                    progress(k + 1, len(episodes))
        manifest = {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "created_at": time.time(),
            "store": str(store.data_dir),
            "filter": asdict(where),
            "include_interrupted": include_interrupted,
            "include_untasked": include_untasked,
            "episodes": len(episodes),
            "steps": n_steps,
            "images": n_images,
            "tool_specs": specs,
            "files": {"episodes": "episodes.parquet", "steps": "steps.parquet"},
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        for name in ("episodes.parquet", "steps.parquet", "manifest.json"):  # manifest last
            with open(tmp / name, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp / name, out / name)
        fsync_dir(out)
    except OSError as exc:
        raise ExportError(f"writing the export to {out} failed: {exc}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return ExportReport(
        out=str(out),
        episodes=len(episodes),
        steps=n_steps,
        images=n_images,
        seconds=time.perf_counter() - t0,
        files=["episodes.parquet", "steps.parquet", "manifest.json"],
    )
