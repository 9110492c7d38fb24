"""Both themes meet WCAG AA text contrast (4.5:1): the palette's text roles, and every colour a
style sheet gives text against the background it sits on."""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # these tests never need a display

import re  # noqa: E402

import pytest  # noqa: E402
from PySide6.QtGui import QColor, QPalette  # noqa: E402

from studio.theme import ASSETS, TEXT_PAIRS, apply_theme, contrast  # noqa: E402

AA = 4.5


def qss_pairs(name: str) -> list[tuple[str, str, str]]:
    """(rule, text colour, background) for each rule that colours text; a rule without its own
    background sits on the window's."""
    text = (ASSETS / f"{name}.qss").read_text()
    window = re.search(r"QWidget \{[^}]*background: (#[0-9a-fA-F]{6})", text).group(1)
    pairs = []
    for selector, body in re.findall(r"([^{}]+)\{([^}]*)\}", text):
        fg = re.search(r"(?<![-\w])color: (#[0-9a-fA-F]{6}|white)", body)
        if fg is None:
            continue
        bg = re.search(r"(?<![-\w])background: (#[0-9a-fA-F]{6})", body)
        pairs.append((selector.strip().splitlines()[-1], fg.group(1), bg.group(1) if bg else window))
        sel = re.search(r"selection-color: (#[0-9a-fA-F]{6})", body)
        sbg = re.search(r"selection-background-color: (#[0-9a-fA-F]{6})", body)
        if sel and sbg:
            pairs.append((selector.strip() + " (selection)", sel.group(1), sbg.group(1)))
    return pairs


@pytest.mark.parametrize("name", ["dark", "light"])
def test_theme_text_contrast_meets_wcag_aa(qapp, name):
    assert apply_theme(qapp, name) == name
    palette = qapp.palette()
    low = []
    for fg, bg in TEXT_PAIRS:
        ratio = contrast(palette.color(getattr(QPalette.ColorRole, fg)), palette.color(getattr(QPalette.ColorRole, bg)))
        if ratio < AA:
            low.append((fg, bg, round(ratio, 2)))
    for rule, fg, bg in qss_pairs(name):
        if ":disabled" in rule:
            continue  # WCAG exempts inactive controls
        ratio = contrast(QColor(fg), QColor(bg))
        if ratio < AA:
            low.append((rule, fg, bg, round(ratio, 2)))
    assert low == []
    assert len(qss_pairs(name)) >= 6  # the parser found the rules


def test_contrast_formula_matches_wcag_examples():
    assert contrast(QColor("#000000"), QColor("#ffffff")) == pytest.approx(21.0)
    assert contrast(QColor("#777777"), QColor("#ffffff")) == pytest.approx(4.48, abs=0.01)
