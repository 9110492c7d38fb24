"""Generated input for exercising the tool runtime: schema-driven fuzzing (`modelwright tools
stress`) and big scenes made in one call (`write_cubes`, for the scale tests and benchmark).

Arguments are generated from each tool's JSON schema, then half of them are mutated (huge
strings, NaN and infinities, deep nesting, wrong types, unknown keys). The supervisor must
answer every call with a result; a worker crash or hang caused by input is reported.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

from tools.errors import ErrorKind
from tools.specs import TOOLS

NAMES = ["A", "B", "part", "Cube", "plate", "x.1", "shaft"]


def value_for(schema: dict, rng: random.Random, depth: int = 0):
    if "enum" in schema:
        return rng.choice(schema["enum"])
    t = schema.get("type")
    if t == "object":
        props = schema.get("properties", {})
        req = set(schema.get("required", []))
        return {k: value_for(v, rng, depth + 1) for k, v in props.items() if k in req or rng.random() < 0.5}
    if t == "array":
        lo, hi = schema.get("minItems", 0), min(schema.get("maxItems", 4), 6)
        return [value_for(schema.get("items", {}), rng, depth + 1) for _ in range(rng.randint(lo, max(lo, hi)))]
    if t == "integer":
        lo, hi = schema.get("minimum", -5), schema.get("maximum", 10)
        return rng.randint(int(lo), int(min(hi, lo + 20)))
    if t == "number":
        lo = schema.get("minimum", schema.get("exclusiveMinimum", -10) + 1e-3)
        hi = schema.get("maximum", 10)
        return round(rng.uniform(max(lo, -20), min(hi, 20) if hi > lo else hi), 3)
    if t == "boolean":
        return rng.random() < 0.5
    if t == "string":
        if schema.get("pattern", "").startswith("^#"):
            return f"#{rng.randrange(1 << 24):06X}"
        return rng.choice(NAMES)
    return None


def mutate(args, rng: random.Random):
    choice = rng.randrange(8)
    if choice == 0:
        return "x" * rng.choice([10_000, 1_000_000])
    if choice == 1:
        nested: object = 1
        for _ in range(rng.choice([50, 500, 5000])):
            nested = [nested]
        return {"name": "A", "dimensions": nested}
    if not isinstance(args, dict) or not args:
        return rng.choice([None, 42, "str", [1, 2], {"unknown": 1}])
    key = rng.choice(list(args))
    bad = dict(args)
    bad[key] = rng.choice([math.nan, math.inf, -math.inf, None, "🜁" * 3, [], {}, 10**30, -1, True,
                           "x" * 100_000, [[[[1]]]]])
    if choice == 7:
        bad["unexpected_" + key] = 1
    return bad


def calls(n: int, seed: int = 0):
    rng = random.Random(seed)
    names = list(TOOLS)
    for _ in range(n):
        tool = rng.choice(names)
        if rng.random() < 0.03:
            tool = rng.choice(["", "rm -rf", "x" * 300, "get_scene\x00"])
        args = value_for(TOOLS[tool].schema(), rng) if tool in TOOLS else {}
        if tool == "render" and isinstance(args, dict):
            args["size"] = min(args.get("size", 64), 128)
        if tool == "cadquery_script" and isinstance(args, dict):
            args["code"] = rng.choice(["import cadquery as cq\nresult = cq.Workplane().box(1, 2, 3)",
                                       "result = 1/0", "import os", "while False: pass", "(((", "x = 1"])
        if rng.random() < 0.5:
            args = mutate(args, rng)
        yield tool, args


def run_fuzz(n: int, seed: int = 0, progress: bool = False, session=None, reset_every: int = 150) -> dict:
    from tools.runtime.session import ToolSession

    own = session is None
    s = session or ToolSession(deadline_s=10)
    counts: dict[str, int] = {"ok": 0}
    supervisor_errors: list[str] = []
    t0 = time.perf_counter()
    try:
        it = calls(n, seed)
        if progress:
            from tqdm import tqdm

            it = tqdm(it, total=n, desc="fuzz")
        for i, (tool, args) in enumerate(it):
            if i and i % reset_every == 0:
                s.reset()
            try:
                r = s.call(tool, args)
                json.dumps(r.to_dict())
            except Exception as e:  # the supervisor must never raise for a call
                supervisor_errors.append(f"{tool}: {type(e).__name__}: {e}"[:300])
                continue
            key = "ok" if r.ok else r.error.kind.value
            counts[key] = counts.get(key, 0) + 1
        alive = s.call("get_scene", {}).ok
    finally:
        if own:
            s.close()
    return {"calls": n, "seconds": round(time.perf_counter() - t0, 2), "outcomes": counts,
            "supervisor_errors": supervisor_errors, "alive_after": alive,
            "worker_failures": counts.get(ErrorKind.CRASH.value, 0) + counts.get(ErrorKind.TIMEOUT.value, 0)}


def write_cubes(path: Path, n: int, size: float = 0.4) -> None:
    """An OBJ file of `n` cubes on a unit grid (100 a row), named cube_00000...: a big scene
    in one `import_file` call."""
    lines, base = [], 0
    for i in range(n):
        x, y = (i % 100) * 1.0, (i // 100) * 1.0
        lines.append(f"o cube_{i:05d}")
        for dz in (0, size):
            for dx, dy in ((0, 0), (size, 0), (size, size), (0, size)):
                lines.append(f"v {x + dx} {y + dy} {dz}")
        for f in ((1, 4, 3, 2), (5, 6, 7, 8), (1, 2, 6, 5), (2, 3, 7, 6), (3, 4, 8, 7), (4, 1, 5, 8)):
            lines.append("f " + " ".join(str(base + k) for k in f))
        base += 8
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
