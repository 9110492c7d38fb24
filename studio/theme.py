"""Light and dark themes: Qt style sheets shipped in assets/."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

ASSETS = Path(__file__).resolve().parent.parent / "assets"
THEMES = ("dark", "light")


def apply_theme(app: QApplication, name: str) -> str:
    """Apply `name` (dark | light); an unknown name falls back to dark. Returns the one applied."""
    name = name if name in THEMES else "dark"
    app.setStyle("Fusion")
    app.setPalette(palette_for(name))
    app.setStyleSheet((ASSETS / f"{name}.qss").read_text())
    return name


# The palette item views, menus and placeholders use (the style sheets set the rest). Selected
# rows: dark text on a pale highlight in the light theme (white on pale blue was unreadable).
PALETTES = {
    "dark": {"Window": "#1e2126", "WindowText": "#d7dae0", "Base": "#16181c", "AlternateBase": "#1b1e22",
             "Text": "#d7dae0", "Button": "#2d323b", "ButtonText": "#d7dae0", "Highlight": "#3d5a80",
             "HighlightedText": "#ffffff", "PlaceholderText": "#8f96a1", "ToolTipBase": "#262a31",
             "ToolTipText": "#e6e8ec", "BrightText": "#ffffff", "Link": "#8ab4f8"},
    "light": {"Window": "#f4f5f7", "WindowText": "#22252a", "Base": "#ffffff", "AlternateBase": "#f0f2f5",
              "Text": "#22252a", "Button": "#e8eaee", "ButtonText": "#22252a", "Highlight": "#b9d0ef",
              "HighlightedText": "#111418", "PlaceholderText": "#5f6570", "ToolTipBase": "#ffffff",
              "ToolTipText": "#22252a", "BrightText": "#000000", "Link": "#1f5aa6"},
}
# (foreground role, background role) pairs that carry text: each must meet WCAG AA (4.5:1)
TEXT_PAIRS = (("WindowText", "Window"), ("Text", "Base"), ("ButtonText", "Button"),
              ("HighlightedText", "Highlight"), ("PlaceholderText", "Base"), ("Text", "AlternateBase"),
              ("ToolTipText", "ToolTipBase"), ("Link", "Base"))


def palette_for(name: str) -> QPalette:
    palette = QPalette()
    for role, colour in PALETTES[name].items():
        for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
            palette.setColor(group, getattr(QPalette.ColorRole, role), QColor(colour))
    return palette


def contrast(a: QColor, b: QColor) -> float:
    """WCAG 2 contrast ratio of two colours (1 to 21)."""
    def lum(c: QColor) -> float:
        def ch(v: float) -> float:
            return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4
        return 0.2126 * ch(c.redF()) + 0.7152 * ch(c.greenF()) + 0.0722 * ch(c.blueF())
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)
