"""Typed errors of the trajectory store, each with a message a person can act on."""

from __future__ import annotations


class StoreError(Exception):
    """Base class: something about the store, an episode or an export/import went wrong."""


class EpisodeNotFound(StoreError):
    """No episode has this id (or id prefix)."""


class AmbiguousEpisodeId(StoreError):
    """An id prefix matches more than one episode."""


class CorruptFrame(StoreError):
    """A frame file is missing, truncated, or does not match the checksum recorded with its step."""


class RecorderClosed(StoreError):
    """`add_step`/`finish` was called on a recorder whose episode is already finished or aborted."""


class EpisodeBusy(StoreError):
    """The episode is still being recorded by a live process (it cannot be deleted or imported over)."""


class StoreLocked(StoreError):
    """Another process held the store's index locked for longer than the busy timeout."""


class SchemaTooNew(StoreError):
    """The store was written by a newer Modelwright whose schema this version does not know."""


class ExportError(StoreError):
    """An export could not be written (unwritable destination, unknown format...)."""


class ImportSourceError(StoreError):
    """The folder given to `data import` is neither a store nor an export."""


class CorruptIndex(StoreError):
    """The SQLite index cannot be read; `modelwright data doctor` rebuilds it from the folders."""
