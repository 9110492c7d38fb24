"""An episode folder's layout and the store's JSON encoding, shared by the store, the
recorder, the importer and upkeep (a leaf module: it imports nothing of the store)."""

from __future__ import annotations

import json
from typing import Any

FRAMES = "frames"
ARTIFACTS = "artifacts"


def dumps(value: Any) -> str:
    """Compact JSON as the store keeps it (UTF-8 text, anything unknown as its str)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
