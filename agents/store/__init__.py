"""The trajectory store: crash-safe recording of every episode, export for training, replay.

store = Store(data_dir=None)     # explicit > MODELWRIGHT_DATA_DIR > platformdirs default
rec = store.begin_episode(task_id=..., source="agent", tools=catalogue(), ...)
rec.add_step(tool=..., args=..., result=..., frame=png, scene_hash=...)
rec.finish(reward=..., components=..., success=..., artifacts={...})
"""

from agents.store import models
from agents.store.errors import (
    AmbiguousEpisodeId,
    CorruptFrame,
    EpisodeBusy,
    EpisodeNotFound,
    ExportError,
    ImportSourceError,
    RecorderClosed,
    SchemaTooNew,
    StoreError,
    StoreLocked,
)
from agents.store.location import ENV_VAR, resolve_data_dir
from agents.store.models import Episode, EpisodeFilter, Step
from agents.store.recorder import Recorder
from agents.store.store import Store

__all__ = [
    "ENV_VAR",
    "AmbiguousEpisodeId",
    "CorruptFrame",
    "Episode",
    "EpisodeBusy",
    "EpisodeFilter",
    "EpisodeNotFound",
    "ExportError",
    "ImportSourceError",
    "Recorder",
    "RecorderClosed",
    "SchemaTooNew",
    "Step",
    "Store",
    "StoreError",
    "StoreLocked",
    "models",
    "resolve_data_dir",
]
