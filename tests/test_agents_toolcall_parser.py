"""The fallback tool-call parser: a corpus of real-looking outputs, then properties."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.policies.toolcall_parser import parse_tool_calls

KNOWN = ["add_primitive", "transform", "set_material", "render", "get_scene", "cad_box"]

CUBE = {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}

# (model output, expected [(name, arguments)], expected leftover text or None)
CORPUS = [
    # Qwen / Hermes
    (
        '<tool_call>\n{"name": "add_primitive", "arguments": {"kind": "cube", "name": "A", '
        '"dimensions": [1, 1, 1]}}\n</tool_call>',
        [("add_primitive", CUBE)],
        None,
    ),
    (
        "I will add a cube and colour it.\n<tool_call>\n"
        '{"name": "add_primitive", "arguments": {"kind": "cube", "name": "A", "dimensions": [1,1,1]}}'
        '\n</tool_call>\n<tool_call>\n{"name": "set_material", "arguments": {"object": "A", '
        '"color": "#ff0000"}}\n</tool_call>',
        [("add_primitive", CUBE), ("set_material", {"object": "A", "color": "#ff0000"})],
        "I will add a cube and colour it.",
    ),
    # truncated: closing tag missing
    (
        '<tool_call>{"name": "render", "arguments": {}}',
        [("render", {})],
        None,
    ),
    # Qwen with thinking
    (
        "<think>\nThe user wants a cube.\n</think>\n\n<tool_call>\n"
        '{"name": "get_scene", "arguments": {}}\n</tool_call>',
        [("get_scene", {})],
        "<think>\nThe user wants a cube.\n</think>",
    ),
    # malformed JSON inside tags: the call survives with raw text, name guessed
    (
        '<tool_call>{"name": "transform", "arguments": {"object": "A", "location": [0, 0, }</tool_call>',
        [("transform", '{"name": "transform", "arguments": {"object": "A", "location": [0, 0, }')],
        None,
    ),
    # garbage inside tags
    ("<tool_call>cube please</tool_call>", [("", "cube please")], None),
    # trailing comma repaired
    (
        '<tool_call>{"name": "render", "arguments": {"size": 256,},}</tool_call>',
        [("render", {"size": 256})],
        None,
    ),
    # single quotes / Python literals repaired
    (
        "<tool_call>{'name': 'cad_box', 'arguments': {'length': 10, 'centered': True}}</tool_call>",
        [("cad_box", {"length": 10, "centered": True})],
        None,
    ),
    # arguments as a JSON string (OpenAI habit)
    (
        '<tool_call>{"name": "render", "arguments": "{\\"size\\": 128}"}</tool_call>',
        [("render", {"size": 128})],
        None,
    ),
    # fenced JSON
    (
        'Here is the call:\n```json\n{"name": "add_primitive", "arguments": '
        '{"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}}\n```\nDone.',
        [("add_primitive", CUBE)],
        "Here is the call:\n\nDone.",
    ),
    # fenced array of calls in the `tools run` format
    (
        '```json\n[{"tool": "get_scene", "args": {}}, {"tool": "render", "args": {"size": 64}}]\n```',
        [("get_scene", {}), ("render", {"size": 64})],
        None,
    ),
    # bare JSON in prose
    (
        'Sure! {"name": "get_scene", "arguments": {}} should show the scene.',
        [("get_scene", {})],
        "Sure!  should show the scene.",
    ),
    # OpenAI shape
    (
        '{"type": "function", "function": {"name": "render", "arguments": "{\\"size\\": 64}"}}',
        [("render", {"size": 64})],
        None,
    ),
    # parameters key (Llama 3 JSON style)
    (
        '{"name": "transform", "parameters": {"object": "A", "location": [1, 2, 3]}}',
        [("transform", {"object": "A", "location": [1, 2, 3]})],
        None,
    ),
    # Llama <function=...>
    (
        '<function=set_material>{"object": "A", "color": "#00ff00"}</function>',
        [("set_material", {"object": "A", "color": "#00ff00"})],
        None,
    ),
    # Llama python tag
    (
        '<|python_tag|>{"name": "get_scene", "parameters": {}}',
        [("get_scene", {})],
        None,
    ),
    # Mistral
    (
        '[TOOL_CALLS] [{"name": "render", "arguments": {"size": 128}}]',
        [("render", {"size": 128})],
        None,
    ),
    # Python-call style
    (
        'add_primitive(kind="cube", name="A", dimensions=[1, 1, 1])',
        [("add_primitive", CUBE)],
        None,
    ),
    (
        "First render(size=64) then get_scene()",
        [("render", {"size": 64}), ("get_scene", {})],
        "First  then",
    ),
    # Python-call with a positional argument: kept raw so the loop can explain
    (
        "transform('A', location=[0, 0, 1])",
        [("transform", "transform('A', location=[0, 0, 1])")],
        None,
    ),
    # unknown function names in prose are not calls
    ("You could print(x) or call foo(bar=1).", [], "You could print(x) or call foo(bar=1)."),
    # JSON that is data, not a call
    (
        'The scene is {"objects": [{"name": "A"}]}.',
        [],
        'The scene is {"objects": [{"name": "A"}]}.',
    ),
    ('{"name": "A", "kind": "cube"}', [], '{"name": "A", "kind": "cube"}'),
    # plain prose: done
    ("The model is finished.", [], "The model is finished."),
    ("", [], None),
    # random-model garbage
    ("ĠĠcube<|im_start|>}}{{ <tool_c", [], "ĠĠcube<|im_start|>}}{{ <tool_c"),
]


@pytest.mark.parametrize(("output", "expected", "rest"), CORPUS)
def test_corpus(output: str, expected: list, rest: str | None) -> None:
    got = parse_tool_calls(output, known_tools=KNOWN)
    assert [(c.name, c.arguments) for c in got.calls] == expected
    assert got.text == rest


def test_ids_are_unique_and_prefixed() -> None:
    got = parse_tool_calls(
        '<tool_call>{"name": "render", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "get_scene", "arguments": {}}</tool_call>',
        id_prefix="s3",
    )
    assert [c.id for c in got.calls] == ["s3_0", "s3_1"]


def test_python_calls_need_known_tools() -> None:
    assert parse_tool_calls("render(size=64)").calls == []


# -- properties ---------------------------------------------------------------------------

names = st.from_regex(r"[a-z][a-z_]{0,20}", fullmatch=True)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.text(max_size=20)
    # argument text that is itself call syntax: data inside a call, never a second marker
    | st.sampled_from(
        [
            "<tool_call>",
            "</tool_call>",
            "[TOOL_CALLS]",
            "<|python_tag|>",
            "<tool_response>",
            "<function=a>",
            "```json\n",
        ]
    )
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
arguments = st.dictionaries(st.from_regex(r"[a-z_]{1,10}", fullmatch=True), json_values, max_size=5)
prose = st.text(alphabet=st.characters(blacklist_characters="{}[]<>()`"), max_size=40)


def _wrap(style: int, name: str, args: dict) -> str:
    body = json.dumps({"name": name, "arguments": args})
    return [
        f"<tool_call>\n{body}\n</tool_call>",
        f"```json\n{body}\n```",
        body,
        json.dumps({"type": "function", "function": {"name": name, "arguments": json.dumps(args)}}),
        f"<function={name}>{json.dumps(args)}</function>",
        json.dumps([{"tool": name, "args": args}]),
    ][style]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(names, arguments), min_size=1, max_size=3),
    st.integers(0, 5),
    prose,
    prose,
)
def test_round_trip_in_any_style(calls: list, style: int, before: str, after: str) -> None:
    text = before + "\n" + "\n".join(_wrap(style, n, a) for n, a in calls) + "\n" + after
    got = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in got.calls] == calls
    # the prose around the calls survives, up to whitespace
    assert (got.text or "").split() == (before + "\n" + after).split()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_never_raises_and_returns_well_formed_calls(text: str) -> None:
    got = parse_tool_calls(text, known_tools=KNOWN)
    for call in got.calls:
        assert isinstance(call.name, str)
        assert isinstance(call.arguments, dict | str)


@settings(max_examples=200, deadline=None)
@given(prose)
def test_text_without_call_syntax_has_no_calls(text: str) -> None:
    got = parse_tool_calls(text, known_tools=KNOWN)
    assert got.calls == []
    assert got.text == (text.strip() or None)


@pytest.mark.parametrize(
    "payload",
    [
        "{'name': 'set_material', 'arguments': {'Bead', 'red'}}",  # a set (found in a GRPO rollout)
        "{'name': 'set_material', 'arguments': {'name': {'Bead'}}}",  # a set inside the arguments
        "{'name': 'delete', 'arguments': {'name': b'Bead'}}",  # bytes
        "{'name': 'delete', 'arguments': {('a', 'b'): 1}}",  # a tuple key
    ],
)
def test_python_literals_json_cannot_hold_never_raise_and_never_become_arguments(payload) -> None:
    """A reply JSON cannot represent (sets, bytes, tuple keys) parses to a call whose arguments
    are the raw text, which the loop reports to the model as a malformed call; it never raises
    (it once ended a GRPO run at step 29) and every dict it returns is JSON."""
    import json

    got = parse_tool_calls(f"<tool_call>\n{payload}\n</tool_call>", known_tools=KNOWN)
    assert len(got.calls) == 1
    for call in got.calls:
        assert isinstance(call.arguments, str) or json.dumps(call.arguments)
        assert not isinstance(call.arguments, dict)


# --- replies captured from the packaged base (SmolLM2-135M-Instruct), not invented -----------
REAL = json.loads((Path(__file__).parent / "data" / "real_base_replies.json").read_text())


@pytest.mark.parametrize("reply", REAL, ids=[f"real{i}" for i in range(len(REAL))])
def test_replies_the_real_base_wrote(reply):
    """Each captured completion parses to the calls it holds (a doubly quoted name as meant, a
    missing closing tag tolerated, an imitated `<tool_response>` never a call) or to a typed
    no-call, with the text kept."""
    parsed = parse_tool_calls(
        reply["completion"], known_tools=["add_primitive", "transform", "set_material", "delete"]
    )
    assert [c.name for c in parsed.calls] == reply["calls"]
    assert [isinstance(c.arguments, dict) for c in parsed.calls] == reply["arguments_parsed"]
    assert parsed.no_call == reply["no_call"]
    if not parsed.calls:
        assert parsed.text == reply["completion"].strip()


def test_a_tag_whose_argument_holds_the_tag_text_is_one_call() -> None:
    """An argument may be the text "<tool_call>" itself (found by the property test in CI):
    the call's JSON is read whole, not cut at the quoted tag."""
    text = '<tool_call>\n{"name": "a", "arguments": {"_": "<tool_call>"}}\n</tool_call>\nok'
    got = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in got.calls] == [("a", {"_": "<tool_call>"})]
    assert got.text == "ok"
    fenced = '```json\n{"name": "a", "arguments": {"_": [["[TOOL_CALLS]"]]}}\n```'
    got = parse_tool_calls(fenced)
    assert [(c.name, c.arguments) for c in got.calls] == [("a", {"_": [["[TOOL_CALLS]"]]})]
