"""Numbers as people write them: one goal's lengths, sizes and counts said another way (#49).

A family's generator writes its goal once, in its template wording: lengths as `12 mm` or
`0.5 m`, sizes as `120 x 60 x 4 mm` or `(1, 1, 1.1) m`, counts as digits. `say_numbers`
re-says that text in a `NumberStyle` without changing one quantity: `12 mm` as `1.2 cm` or
`0.012 m` or `12 millimetres`, `1.5 x 2 m` as `1.5 by 2 m` or `1.5 m by 2 m`, `4 holes` as
`four holes`, `centred` as `centered`, `15°` as `15 degrees`. Names in quotes, colours and
file paths are never touched. Every family's wordings go through here
(training/tasks/wording.py), so there is one way to write a number, not 36.

A unit applies to the whole run of numbers before it (`(-52, 0), (52, 0) mm`,
`x = -0.6, 0 and 0.6 m`); a run whose left end follows another number (a list this module
does not see whole) is left as written rather than half converted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

NUM = r"[-+±]?\d+(?:\.\d+)?"
_TUPLE = rf"\({NUM}(?:, {NUM})*\)"
_ITEM = rf"(?:{NUM}|{_TUPLE})"
_SEP = r"(?:, | x | and | or | to )"
# A run of numbers and the length unit that follows it (not `m³`, `kg/m³`, `mm lens`).
RUN = re.compile(rf"(?<![\w.,±+\-])(?P<run>{_ITEM}(?:{_SEP}{_ITEM})*) (?P<unit>mm|m)"
                 rf"(?![\w³²/])(?! lens| sensor)")
_NUMBER = re.compile(r"(?<![\w.])(?P<sign>[-+±]?)(?P<digits>\d+(?:\.\d+)?)")
# A number just before a run: the run is the tail of a longer list, left as written.
_LIST_BEFORE = re.compile(rf"{NUM}\)?(?:, | x | and | or | to )$")
# Quoted names, colours and file paths: never re-said.
_PROTECTED = re.compile(r"(?<!\w)'[^']*'(?!\w)|#[0-9A-Fa-f]{3,8}\b|[\w.-]*/[\w./-]+"
                        r"|\b[\w-]+\.(?:step|stp|stl|glb|gltf|3mf|svg|obj|blend|png)\b")
METRES_PER = {"mm": Decimal("0.001"), "cm": Decimal("0.01"), "m": Decimal(1)}
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve")
UNIT_WORDS = {"mm": "millimetres", "cm": "centimetres", "m": "metres"}
# Words after which a small number is a count a person would spell out ("three holes"),
# by exclusion: units, and words that join numbers or ranks.
_NOT_COUNTED = {"x", "by", "and", "or", "to", "of", "in", "mm", "cm", "m", "kg", "g", "W", "s",
                "degrees", "millimetres", "millimeters", "centimetres", "centimeters", "metres",
                "meters", "more", "less"}
_COUNT = re.compile(r"(?<![\w.,±+\-=/(°])(?<!x )(?<!by )(?<!× )(?P<n>\d{1,2})(?= (?P<w>[a-z]+)\b)")
# A unit said in words where a person would ("6 millimetres across", not "a 6 millimetres
# hole"): before punctuation, the end, or a word that says what the length measures.
_UNIT_AS_WORD = re.compile(
    r"(?<=[\d)]) (mm|cm|m)(?![\w³²/])(?=[,.;:)]|$| (?:across|long|wide|tall|high|deep|thick"
    r"|apart|above|below|from|in|on|to|and|or|along|away|up|down|behind|beyond|each|with"
    r"|by|x|×|off|clear|of|at|outside|inside|over|under)\b)")
_DEGREES_AS_WORD = re.compile(r"(?<=\d)°(?=[,.;:)]|$| (?:about|around|above|below|from|to|and|or"
                              r"|closed|flat|open|with|so|in|on)\b)")  # not "a 15° turn"
US = {"centre": "center", "centres": "centers", "centred": "centered", "centring": "centering",
      "metre": "meter", "metres": "meters", "millimetre": "millimeter",
      "millimetres": "millimeters", "centimetre": "centimeter", "centimetres": "centimeters",
      "colour": "color", "colours": "colors", "coloured": "colored", "grey": "gray",
      "aluminium": "aluminum"}
_US = re.compile(r"\b(" + "|".join(sorted(US, key=len, reverse=True)) + r")\b", re.IGNORECASE)


@dataclass(frozen=True)
class NumberStyle:
    """How one wording writes numbers. `units`: `given` (as the template), `cm` (sizes in
    centimetres), `small` (metres under 1 in millimetres), `si` (millimetres as metres);
    `repeat`: the unit after every number of a size (`1.5 m x 2 m`); `times`: what joins a
    size's numbers; `words`: units and degrees in words; `counts`: small counts in words;
    `spelling`: `uk` or `us`."""

    units: str = "given"
    repeat: bool = False
    times: str = " x "
    words: bool = False
    counts: bool = False
    spelling: str = "uk"


def decimal_text(value: Decimal) -> str:
    """`Decimal` -> the shortest plain text: 0.012, 12, -0.5 (never 1E+1 or -0)."""
    text = format(value.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "+0") else text


def _values(run: str) -> list[Decimal]:
    return [Decimal(m.group("digits")) for m in _NUMBER.finditer(run)]


def _target(style: str, unit: str, values: list[Decimal]) -> str:
    """The unit a run is said in under `style` (its own when nothing natural fits)."""
    def exact(factor: Decimal, places: int) -> bool:
        return all((v * factor) == round(v * factor, places) for v in values)

    if style == "si" and unit == "mm":
        return "m"
    if style == "cm":
        if unit == "mm" and exact(Decimal("0.1"), 2):
            return "cm"
        if unit == "m" and all(v <= 3 for v in values) and exact(Decimal(100), 1):
            return "cm"
    if style == "small" and unit == "m" and all(v < 1 for v in values) and exact(Decimal(1000), 1):
        return "mm"
    return unit


def _convert(text: str, style: str) -> str:
    def one(m: re.Match) -> str:
        run, unit = m.group("run"), m.group("unit")
        if _LIST_BEFORE.search(m.string[: m.start()]):
            return m.group(0)
        target = _target(style, unit, _values(run))
        if target == unit:
            return m.group(0)
        factor = METRES_PER[unit] / METRES_PER[target]
        said = _NUMBER.sub(lambda n: n.group("sign") + decimal_text(Decimal(n.group("digits"))
                                                                     * factor), run)
        return f"{said} {target}"

    return RUN.sub(one, text)


_SIZE = re.compile(rf"(?<![\w.,±+\-])(?P<run>{NUM}(?: x {NUM})+) (?P<unit>mm|cm|m)(?![\w³²/])")


def _repeat(text: str) -> str:
    """`1.5 x 2 m` -> `1.5 m x 2 m`."""
    return _SIZE.sub(lambda m: " x ".join(f"{v} {m.group('unit')}"
                                          for v in m.group("run").split(" x ")), text)  # fmt: skip


def _counts(text: str) -> str:
    def one(m: re.Match) -> str:
        n = int(m.group("n"))
        if not 1 <= n < len(WORDS) or m.group("w") in _NOT_COUNTED:
            return m.group(0)
        word = WORDS[n]
        start = m.string[: m.start()].rstrip(" \x00")
        return word.capitalize() if not start or start.endswith((".", ":")) else word

    return _COUNT.sub(one, text)


def _unit_word(m: re.Match) -> str:
    """" metres", or " metre" after a lone 1 ("1 metre", but "0.5 x 1 metres")."""
    before = m.string[: m.start()]
    one = re.search(r"(?<![\d.])[-±]?1$", before) and not re.search(
        r"(?:, | x | by | × | and | or | to )[-±]?1$", before)
    word = UNIT_WORDS[m.group(1)]
    return " " + (word[:-1] if one else word)


def _us(text: str) -> str:
    def one(m: re.Match) -> str:
        word = US[m.group(0).lower()]
        return word.capitalize() if m.group(0)[0].isupper() else word

    return _US.sub(one, text)


def say_numbers(text: str, style: NumberStyle) -> str:
    """`text` with its numbers written in `style`; every quantity it states is unchanged."""
    kept: list[str] = []

    def keep(m: re.Match) -> str:
        kept.append(m.group(0))
        return f"\x00{len(kept) - 1}\x00"

    out = _PROTECTED.sub(keep, text)
    if style.units != "given":
        out = _convert(out, style.units)
    if style.repeat:
        out = _repeat(out)
    out = re.sub(r"(\d|\)|\b(?:mm|cm|m)) x (?=[-±]?\d|\()", lambda m: m.group(1) + style.times,
                 out)
    if style.words:
        out = _UNIT_AS_WORD.sub(_unit_word, out)
        out = _DEGREES_AS_WORD.sub(" degrees", out)
    if style.counts:
        out = _counts(out)
    if style.spelling == "us":
        out = _us(out)
    return re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m.group(1))], out)
