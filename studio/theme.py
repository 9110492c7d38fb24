"""Light and dark themes: Qt style sheets shipped in assets/."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QApplication

ASSETS = Path(__file__).resolve().parent.parent / "assets"
THEMES = ("dark", "light")


def apply_theme(app: QApplication, name: str) -> str:
    """Apply `name` (dark | light); an unknown name falls back to dark. Returns the one applied."""
    name = name if name in THEMES else "dark"
    app.setStyle("Fusion")
    app.setStyleSheet((ASSETS / f"{name}.qss").read_text())
    return name
