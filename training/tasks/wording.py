"""Goals as people write them (#49): every task's goal in one of several wordings.

A family's generator writes the goal once, in its *template* wording (wording 0: the text its
ids showed before #49). Wording `i` re-says that text three ways, in this order: the family's
own phrase swaps (`Wordings.swaps`, declared in the family's module: "of size (1, 1, 2) m
centred at (0, 3, 1) m" -> "(1, 1, 2) m in size, its centre at (0, 3, 1) m"), the way numbers
are written (`VOICES[i]`, training/tasks/numbers.py: "12 mm" / "1.2 cm" / "0.012 m", "1.5 x 2" /
"1.5 by 2", "centre" / "center", "3 holes" / "three holes") and a frame around it
(`Wordings.frames`). The parameters, the oracle and the checker come from the generator
alone, before a wording is chosen, so every wording of a task is the same task, checked the
same way.

Wordings 0..SEEN-1 are *seen*: a task id `family:level:seed` shows the one its id picks
(`wording_index`, a hash of the id: the same id, the same text, always), in every split.
Wordings SEEN.. are *unseen* (held-out phrasings): no plain id ever shows one, so training
never does; `family:level:seed:unseen` shows the one the id picks among them, and
`family:level:seed:wN` wording N exactly (`N = 0` is the template).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from training.tasks.numbers import NumberStyle, say_numbers

# How each wording writes numbers. 0 is the template; SEEN.. are never trained on, and add
# what no seen wording does: the unit after every number of a size ("1.4 m by 0.8 m").
VOICES: tuple[NumberStyle, ...] = (
    NumberStyle(),
    NumberStyle(times=" by ", counts=True, spelling="us"),
    NumberStyle(units="cm", times=" × "),
    NumberStyle(units="small", words=True, counts=True),
    NumberStyle(units="si", times=" by ", spelling="us"),
    NumberStyle(words=True, counts=True, spelling="us"),
    NumberStyle(units="small", repeat=True, times=" by ", counts=True, spelling="us"),
    NumberStyle(units="cm", repeat=True, words=True),
)
SEEN = 6  # wordings 0..5 are seen in training; 6 and 7 are held out
PHRASINGS = ("seen", "unseen")

# The frame around a goal, one per wording ("{}" is the goal); the last two are unseen.
FRAMES: tuple[str, ...] = (
    "{}",
    "{} Thanks.",
    "Here is the job: {}",
    "Task: {}",
    "{} That's all.",
    "Please help with this. {}",
    "Hi, a quick job for you. {}",
    "{} Shout if anything is unclear.",
)


@dataclass(frozen=True)
class Swap:
    """One phrase of a family's template said other ways: `pattern` (a regex over the
    template text) and its replacements (format strings over the pattern's named groups, or
    functions of the match), `seen` for wordings 1..SEEN-1 in turn, `unseen` for the held-out
    ones (none: the phrase stays as the template says it)."""

    pattern: str
    seen: tuple[str | Callable[[re.Match], str], ...] = ()
    unseen: tuple[str | Callable[[re.Match], str], ...] = ()

    def replacement(self, index: int) -> str | Callable[[re.Match], str] | None:
        if index == 0:
            return None
        pool, k = (self.seen, index - 1) if index < SEEN else (self.unseen, index - SEEN)
        return pool[k % len(pool)] if pool else None

    def apply(self, text: str, index: int) -> str:
        rep = self.replacement(index)
        if rep is None:
            return text
        if isinstance(rep, str):
            return re.sub(self.pattern, lambda m, r=rep: r.format(**m.groupdict()), text)
        return re.sub(self.pattern, rep, text)


def swap(pattern: str, *seen: str | Callable[[re.Match], str],
         unseen: tuple[str | Callable[[re.Match], str], ...] = ()) -> Swap:  # fmt: skip
    return Swap(pattern, tuple(seen), tuple(unseen))


@dataclass(frozen=True)
class Wordings:
    """How a family's goals are re-said: its phrase swaps (most particular first) and its
    frames (one per wording, `FRAMES` unless it has its own)."""

    swaps: tuple[Swap, ...] = ()
    frames: tuple[str, ...] = FRAMES

    def __post_init__(self) -> None:
        if len(self.frames) != len(VOICES) or any(f.count("{}") != 1 for f in self.frames):
            raise ValueError(f"a family's frames are {len(VOICES)} strings with one '{{}}' each")

    def say(self, template: str, index: int) -> str:
        """The goal `template` in wording `index` (0: the template itself)."""
        if index == 0:
            return template
        text = template
        for s in self.swaps:
            text = s.apply(text, index)
        text = say_numbers(text, VOICES[index])
        text = self.frames[index].format(text[0].upper() + text[1:])
        return re.sub(r" {2,}", " ", text)


def wording_index(family: str, level: int, seed: int, phrasing: str | None = None) -> int:
    """The wording a task id shows: `phrasing` None or `seen`: one of 0..SEEN-1, `unseen`: one
    of the held-out ones, picked by a hash of the id; `wN`: N."""
    if phrasing and phrasing.startswith("w"):
        return int(phrasing[1:])
    pool = range(SEEN, len(VOICES)) if phrasing == "unseen" else range(SEEN)
    return pool[random.Random(f"wording:{family}:{level}:{seed}").randrange(len(pool))]


def check_phrasing(text: str) -> str | None:
    """A task id's fourth field: `seen` (the same as none), `unseen` or `w0`..`w7`; None if
    it is none of them."""
    if text in PHRASINGS:
        return text
    if re.fullmatch(r"w\d+", text) and int(text[1:]) < len(VOICES):
        return text
    return None


def phrasing_of(index: int) -> str:
    return "seen" if index < SEEN else "unseen"


def phrasing_of_id(task_id: str) -> str | None:
    """`seen` or `unseen` for a task id (from its fourth field alone, without building the
    task); None for an id that is no task id."""
    parts = task_id.split(":")
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return "seen"
    if len(parts) != 4 or not (parts[1].isdigit() and parts[2].isdigit()):
        return None
    field = check_phrasing(parts[3])
    if field is None:
        return None
    return phrasing_of(int(field[1:])) if field.startswith("w") else field
