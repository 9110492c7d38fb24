"""Where a model comes from: a registered name (`agents/models/registry.py`: the packaged base, added
GGUFs and folders), a local folder, or a hub id the user named on purpose.

`transformers` treats any string it cannot find on disk as a hub id and goes to the network,
retrying for minutes before it says `Repo id must be in the form ...` about a typo'd folder.
Here a name is a local folder when it exists; a hub id only when it has the `org/name` shape
and is not a path on disk (`is_hub_id`, which a training config's `model.path` is checked
with too); anything else is a missing folder, said at once. Local folders load with
`local_files_only` (nothing reaches for the hub); hub ids get short timeouts and a one-line
error. Light: no torch or transformers at import.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agents.models.registry import resolve as registered
from tools.cli.exits import ExitCode, Unavailable, UserError, one_line

HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
HUB_TIMEOUT_S = 10  # per request; the hub's default retries a dead network for minutes
EXAMPLE_HUB_ID = "Qwen/Qwen3-VL-2B-Instruct"


class ModelNotFound(UserError):
    exit_code = ExitCode.USAGE


@dataclass(frozen=True)
class ModelSource:
    name: str  # what to pass to from_pretrained
    local: bool

    def kwargs(self) -> dict:
        return {"local_files_only": True} if self.local else {}


def is_hub_id(name: str) -> bool:
    """`name` is a hub id (`org/name`), not a local path: nothing on disk has that name, and
    `org` is no folder here (`runs/model` under an existing `runs/` is a missing folder)."""
    if not HUB_ID.fullmatch(name) or Path(name).exists():
        return False
    return not Path(name.split("/", 1)[0]).is_dir()


def resolve_model(name: str | os.PathLike[str] | None, what: str = "model",
                  probe: bool = True) -> ModelSource:
    """A registered model (`modelwright models list`, `agents/models/registry.py`), a local model
    folder or a hub id; `ModelNotFound` (one line, what to do) otherwise.
    `probe` asks the hub once (no retries) whether a hub id is there: the hub client would
    retry a dead network for ~30 s per file. Without an answer a cached copy is used."""
    if not name:
        raise ModelNotFound(f"no {what} given; pass a local model folder or a hub id like "
                            f"{EXAMPLE_HUB_ID}")
    text = str(name)
    folder = registered(text)  # a registered name first (the packaged base builds here)
    if folder is not None:
        return ModelSource(str(folder), True)
    path = Path(text).expanduser()
    if path.exists():
        return ModelSource(str(local_model_folder(path, what)), True)
    if is_hub_id(text):
        _short_hub_timeouts()
        if probe and not _on_hub(text):
            if _cached(text):
                return ModelSource(text, True)  # offline: the copy in the hub cache
            from huggingface_hub import constants

            raise Unavailable(
                f"cannot reach the model hub at {constants.ENDPOINT} for {text} (no answer "
                f"within {HUB_TIMEOUT_S} s, no cached copy); check the network, or download "
                "it and pass its folder"
            )
        return ModelSource(text, False)
    raise ModelNotFound(
        f"no {what} folder at {path}; `modelwright models list` names the local "
        f"models, or name a hub id like {EXAMPLE_HUB_ID}"
    )


def local_model_folder(path: str | os.PathLike[str], what: str = "model") -> Path:
    """`path` as a model folder (it holds config.json), or `ModelNotFound`."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ModelNotFound(f"no {what} folder at {folder}; `modelwright models list` "
                            "names the local models, or point at a downloaded one")
    if not (folder / "config.json").is_file():
        raise ModelNotFound(f"{folder} is not a {what} folder (no config.json); point at the "
                            "folder a checkpoint was saved to")
    return folder


@contextmanager
def loading(source: ModelSource) -> Iterator[None]:
    """Turn a failed load into one line: a broken local folder (2), an unreachable hub (3)."""
    try:
        yield
    except (OSError, ValueError) as exc:
        if source.local:
            raise ModelNotFound(f"cannot load the model in {source.name}: {one_line(exc)[:300]}"
                                ) from None
        raise Unavailable(
            f"cannot load {source.name} from the model hub ({one_line(exc)[:300]}); check the id "
            "and the network, or download it and pass its folder"
        ) from None


def _short_hub_timeouts() -> None:
    for key in ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"):
        os.environ.setdefault(key, str(HUB_TIMEOUT_S))
    try:  # already imported: its constants were read at import
        from huggingface_hub import constants
    except ImportError:
        return
    constants.HF_HUB_ETAG_TIMEOUT = int(os.environ["HF_HUB_ETAG_TIMEOUT"])
    constants.HF_HUB_DOWNLOAD_TIMEOUT = int(os.environ["HF_HUB_DOWNLOAD_TIMEOUT"])


def _on_hub(repo_id: str) -> bool:
    """True when the hub answers for `repo_id` (one request, no retries); a hub that says
    there is no such model ends here with one line."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        get_hf_file_metadata(hf_hub_url(repo_id, "config.json"), timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        raise Unavailable(f"{repo_id} is gated on the hub: accept its terms there and log in "
                          "(`hf auth login`), or pass a downloaded folder") from None
    except RepositoryNotFoundError:
        raise ModelNotFound(f"no model {repo_id} on the hub; check the id, or pass a local "
                            "model folder") from None
    except Exception:  # noqa: BLE001 - any network failure means "no answer"
        return False
    return True


def _cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
