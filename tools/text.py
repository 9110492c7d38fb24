"""Foreign text made safe to show: what a worker, a store or a file wrote never reaches a
terminal or a widget raw.

A terminal obeys escape sequences in what it prints (OSC 0 sets the window title, OSC 52
writes the clipboard, CSI moves the cursor and repaints lines), and bidi overrides reorder
what a person reads. `printable` shows every such character as a visible escape instead;
newlines and tabs are kept, for multi-line errors read better with them.
"""

from __future__ import annotations

import re

# C0 controls but \t and \n, DEL, C1 controls (ESC's one-byte forms: CSI, OSC, ...), bidi
# embeddings, overrides and isolates, and the line and paragraph separators.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: object) -> str:
    """`text` (made a string) with control and bidi characters shown as `\\x1b`, `\\u202e`."""
    return _UNSAFE.sub(_escape, text if isinstance(text, str) else str(text))


def printable_line(text: object) -> str:
    """`printable`, with newlines and tabs escaped too: for one-line surfaces."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")
