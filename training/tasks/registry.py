"""The registry as `tasks list|verify|cards` read it: measured call counts, checker proofs, cards.

Call counts are measured from the oracle plans of a few seeds of each family's split (train
seeds; test seeds for a held-out family), never declared: a family that grows a level shows
its new length the next time anyone lists. Measuring only generates tasks (pure Python, no
worker). `verify_ids` chooses what `tasks verify` checks (training/eval/verify_tasks.py runs
it); `card_png` renders a card's picture.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from training.tasks.base import get_task
from training.tasks.config import SPLITS
from training.tasks.families import FAMILIES
from training.tasks.spec import Family, TaskError

MEASURE_SEEDS = 5  # oracle plans per level that `tasks list` measures
CARD_LEVELS = (1, 5)
CARD_SIZE = (320, 240)
TABLE_START, TABLE_END = "<!-- calls-table -->", "<!-- /calls-table -->"


def split_label(fam: Family) -> str:
    return "held out" if fam.held_out else "train/validation/test"


def family_seeds(fam: Family, n: int) -> list[int]:
    """The first `n` seeds of the family's split: train, or test for a held-out family."""
    seeds = SPLITS["test" if fam.held_out else "train"]
    return list(seeds[:n])


def oracle_calls(name: str, level: int, n: int = MEASURE_SEEDS) -> list[int]:
    """The oracle plan's length on each of the family's first `n` seeds of that level."""
    fam = FAMILIES[name]
    return [len(get_task(f"{name}:{level}:{s}").oracle) for s in family_seeds(fam, n)]


def family_rows(n: int = MEASURE_SEEDS) -> list[dict[str, Any]]:
    """One row per family, sorted by domain then name: domain, levels, split and the oracle's
    call count per level (mean, min, max over `n` seeds). A generator that raises gives an
    `error` instead of counts, so a family being written never hides the others."""
    rows = []
    for fam in sorted(FAMILIES.values(), key=lambda f: (f.domain, f.name)):
        row: dict[str, Any] = {
            "family": fam.name,
            "domain": fam.domain,
            "levels": list(fam.levels),
            "split": split_label(fam),
            "held_out": fam.held_out,
            "description": fam.description,
            "calls": {},
        }
        for level in fam.levels:
            try:
                counts = oracle_calls(fam.name, level, n)
            except Exception as exc:  # noqa: BLE001 - listed as the family's error, one line
                row["error"] = f"level {level}: {type(exc).__name__}: {exc}".splitlines()[0]
                break
            row["calls"][str(level)] = {"mean": round(statistics.fmean(counts), 1),
                                        "min": min(counts), "max": max(counts)}  # fmt: skip
        rows.append(row)
    return rows


def table_text(rows: list[dict[str, Any]], width: int = 100) -> str:
    """The `tasks list` table: domain, family, split, mean oracle calls per level, description,
    each line at most `width` characters."""
    levels = sorted({lv for r in rows for lv in r["levels"]})
    fw = max([len("family")] + [len(r["family"]) for r in rows])
    dw = max([len("domain")] + [len(r["domain"]) for r in rows])
    head = f"{'domain':<{dw}}  {'family':<{fw}}  {'split':<8}" + "".join(
        f"{'L' + str(lv):>5}" for lv in levels)
    lines = [head + "  description"]
    for r in rows:
        cells = "".join(
            f"{_mean(r, lv):>5}" for lv in levels
        )
        split = "held out" if r["held_out"] else "train"
        line = f"{r['domain']:<{dw}}  {r['family']:<{fw}}  {split:<8}{cells}  "
        text = f"error: {r['error']}" if r.get("error") else r["description"]
        room = max(width - len(line), 10)
        lines.append(line + (text if len(text) <= room else text[: room - 1] + "…"))
    held = sum(r["held_out"] for r in rows)
    lines.append("")
    lines.append(f"{len(rows)} families in {len({r['domain'] for r in rows})} domains, {held} held "
                 f"out. L1..: the oracle's mean call count per level over {MEASURE_SEEDS} seeds.")
    return "\n".join(lines)


def _mean(row: dict[str, Any], level: int) -> str:
    c = row["calls"].get(str(level))
    return "-" if c is None else f"{c['mean']:g}"


def calls_table_markdown(rows: list[dict[str, Any]]) -> str:
    """The docs' table of the oracle's mean call count per level per family."""
    levels = sorted({lv for r in rows for lv in r["levels"]})
    out = ["| family | domain | " + " | ".join(f"L{lv}" for lv in levels) + " |",
           "| --- | --- | " + " | ".join("---:" for _ in levels) + " |"]
    for r in rows:
        name = f"`{r['family']}`" + (" (held out)" if r["held_out"] else "")
        out.append(f"| {name} | {r['domain']} | " + " | ".join(_mean(r, lv) for lv in levels)
                   + " |")
    out.append("")
    out.append(f"*Measured by `modelwright tasks cards --table` from the oracle plans of "
               f"{MEASURE_SEEDS} seeds per level (train seeds; test seeds for held-out families).*")
    return "\n".join(out)


def update_between_markers(text: str, body: str) -> str:
    """`text` with the block between the calls-table markers replaced by `body` (appended,
    markers and all, when the markers are absent)."""
    block = f"{TABLE_START}\n{body}\n{TABLE_END}"
    if TABLE_START in text and TABLE_END in text.split(TABLE_START, 1)[1]:
        before, rest = text.split(TABLE_START, 1)
        after = rest.split(TABLE_END, 1)[1]
        return before + block + after
    return text.rstrip("\n") + "\n\n" + block + "\n"


# -- verify: which tasks ----------------------------------------------------------------------------------


def verify_ids(families: Iterable[str] | None, levels: Iterable[int] | None,
               seeds: int) -> tuple[list[str], list[str]]:  # fmt: skip
    """The task ids `tasks verify` checks, and the notes on asked-for levels a family lacks.
    Unknown family names or a bad seed count raise TaskError."""
    names = list(dict.fromkeys(families or sorted(FAMILIES)))
    unknown = [f for f in names if f not in FAMILIES]
    if unknown:
        raise TaskError(f"unknown task families {unknown}; known: {', '.join(sorted(FAMILIES))}")
    if seeds < 1:
        raise TaskError(f"--seeds must be at least 1, not {seeds}")
    wanted = list(dict.fromkeys(levels or []))
    ids, notes = [], []
    for name in names:
        fam = FAMILIES[name]
        for level in wanted or fam.levels:
            if level not in fam.levels:
                notes.append(f"{name} has no level {level} (levels {list(fam.levels)})")
                continue
            ids += [f"{name}:{level}:{s}" for s in family_seeds(fam, seeds)]
    return ids, notes


# -- cards ------------------------------------------------------------------------------------


def card_png(task_id: str, session: Any, size: tuple[int, int] = CARD_SIZE) -> bytes:
    """The oracle's solved scene of `task_id`, one iso view by our renderer, as a small PNG
    (`size`: the square view widened with its background, a palette of 64 colours): the
    docs' card picture."""
    import io

    from PIL import Image

    from tools.trust.images import decode_png

    task = get_task(task_id)
    session.reset()
    task.setup(session)
    for step in task.oracle:  # a recovery oracle fails on purpose first, as `render_target`
        session.call(step["tool"], step["args"])
    side = size[1] * 3 // 2
    shot = session.render(views=["iso"], size=side)
    if not shot.ok or not shot.images:
        raise TaskError(f"{task_id}: the render failed: {shot.error}")
    square = decode_png(shot.images[0], mode="RGB")  # the worker's PNG: bounded decode
    square = square.resize((size[1], size[1]))
    card = Image.new("RGB", size, square.getpixel((0, 0)))  # widened with the background
    card.paste(square, ((size[0] - size[1]) // 2, 0))
    small = card.quantize(colors=64, dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return out.getvalue()


def card_ids(families: Iterable[str] | None) -> tuple[list[str], list[str]]:
    """The card pictures' task ids (`family:1:0`, `family:5:0`) and notes on families that
    lack a level. Seed 0 is the seed of the card's example prompt."""
    names = list(dict.fromkeys(families or sorted(FAMILIES)))
    unknown = [f for f in names if f not in FAMILIES]
    if unknown:
        raise TaskError(f"unknown task families {unknown}; known: {', '.join(sorted(FAMILIES))}")
    ids, notes = [], []
    for name in names:
        missing = [lv for lv in CARD_LEVELS if lv not in FAMILIES[name].levels]
        if missing:
            notes.append(f"{name}: skipped, no level {' or '.join(map(str, missing))} yet "
                         f"(levels {list(FAMILIES[name].levels)})")  # fmt: skip
            continue
        ids += [f"{name}:{lv}:0" for lv in CARD_LEVELS]
    return ids, notes
