"""Hypothesis fuzz of tool arguments from the schemas: the supervisor never breaks."""

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools import TOOLS, ErrorKind
from tools.cli.fuzz import run_fuzz

SLOW = {"render", "cadquery_script", "import_file", "export", "modifier", "boolean"}
FAST_TOOLS = sorted(set(TOOLS) - SLOW)

def from_schema(schema: dict) -> st.SearchStrategy:
    """Valid values for the subset of JSON schema our specs generate."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    t = schema.get("type")
    if t == "object":
        props, req = schema.get("properties", {}), set(schema.get("required", []))
        return st.fixed_dictionaries({k: from_schema(v) for k, v in props.items() if k in req},
                                     optional={k: from_schema(v) for k, v in props.items() if k not in req})
    if t == "array":
        return st.lists(from_schema(schema.get("items", {})), min_size=schema.get("minItems", 0),
                        max_size=min(schema.get("maxItems", 4), 5))
    if t == "integer":
        return st.integers(schema.get("minimum", -100), min(schema.get("maximum", 100), schema.get("minimum", 0) + 50))
    if t == "number":
        lo = schema.get("minimum", schema.get("exclusiveMinimum", -1e5))
        return st.floats(max(lo, -1e3), min(schema.get("maximum", 1e5), 1e3),
                         exclude_min="exclusiveMinimum" in schema, allow_nan=False)
    if t == "boolean":
        return st.booleans()
    if t == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.text(min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 30), 30))
    return st.none()


junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=50)
    | st.just("x" * 100_000) | st.just(math.nan),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@st.composite
def tool_calls(draw):
    tool = draw(st.sampled_from(FAST_TOOLS))
    schema = TOOLS[tool].schema()
    args = draw(from_schema(schema))
    how = draw(st.sampled_from(["valid", "valid", "replace", "junk", "extra"]))
    if how == "replace" and args:
        key = draw(st.sampled_from(sorted(args)))
        args = {**args, key: draw(junk)}
    elif how == "junk":
        args = draw(junk)
    elif how == "extra":
        args = {**args, draw(st.text(min_size=1, max_size=20)): draw(junk)}
    return tool, args


calls_seen = {"n": 0, "kinds": set()}


@settings(max_examples=1500, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(call=tool_calls())
def test_hypothesis_fuzz_never_breaks_the_supervisor(session, call):
    tool, args = call
    calls_seen["n"] += 1
    if calls_seen["n"] % 200 == 0:
        session.reset()
    r = session.call(tool, args)  # must not raise
    json.dumps(r.to_dict())
    assert r.ok or r.error.kind in (ErrorKind.VALIDATION, ErrorKind.KERNEL, ErrorKind.SANDBOX), r.error
    calls_seen["kinds"].add("ok" if r.ok else r.error.kind.value)


def test_schema_fuzz_including_heavy_tools(session):
    """600 more calls over every tool (renders, scripts, booleans) with mutated arguments."""
    report = run_fuzz(600, seed=1, session=session, reset_every=100)
    assert report["supervisor_errors"] == []
    assert report["alive_after"]
    assert report["worker_failures"] == 0, report
    assert report["outcomes"]["ok"] > 50 and report["outcomes"].get("validation", 0) > 100
    assert calls_seen["n"] >= 1000 and {"ok", "validation"} <= calls_seen["kinds"]
