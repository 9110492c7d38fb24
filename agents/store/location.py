"""Where the store lives: explicit argument > MODELWRIGHT_DATA_DIR > the platform's user data dir."""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "MODELWRIGHT_DATA_DIR"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the data dir to use, without creating it."""
    if data_dir is not None and str(data_dir) != "":
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("modelwright", appauthor=False))
