"""The chat templates an exported agent carries: the product's tool format for other runners.

The `hf` policy renders a SmolLM2-style model (a ChatML template without tools) in the Hermes
format of `agents/policies/chat_format.py`: the tools as compact signatures at the end of the
system message, calls as `<tool_call>` blocks, tool results as `<tool_response>` user turns.
An adapter trained here learned exactly that text, so an exported GGUF must render it too:

- `CHATML_TOOLS_JINJA` is the `tokenizer.chat_template` written into the GGUF. Given OpenAI
  messages and tools it renders what `chat_format.render` renders, character for character
  under transformers' Jinja (tests/test_models_export.py checks it on real first turns), and
  reads the same under llama.cpp's own template engine (`llama-server --jinja`).
- `CHATML_TOOLS_OLLAMA` is the Modelfile's TEMPLATE in Go template syntax: the same layout,
  but Ollama hands a template its tools' schemas without defaults or array sizes and its
  properties in sorted order, so the tool lines are a close paraphrase of the trained ones.

Pure text: no imports beyond the standard library.
"""

from __future__ import annotations

# The text `chat_format.TOOL_INSTRUCTIONS` writes before the signatures (kept equal by a test).
TOOL_HEADER = (
    "# Tools\n"
    "To call a tool, write one block per call:\n"
    "<tool_call>\n"
    '{"name": <tool name>, "arguments": <arguments as a JSON object>}\n'
    "</tool_call>\n"
    "Tools (`= value`: the default when left out):\n"
)
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def _jinja_string(text: str) -> str:
    """`text` as a single-quoted Jinja string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


# `type_text` and `signature` mirror chat_format._type_text and chat_format.signature.
CHATML_TOOLS_JINJA = (
    "{%- macro type_text(s) -%}"
    "{%- if 'enum' in s -%}"
    "{%- for v in s['enum'] -%}{{ '|' if not loop.first }}{{ v | tojson }}{%- endfor -%}"
    "{%- elif s['type'] is defined and s['type'] == 'array' -%}"
    "{%- set item = type_text(s['items'] if 'items' in s and s['items'] else {}) -%}"
    "{%- if 'minItems' in s and 'maxItems' in s and s['minItems'] is not none"
    " and s['minItems'] == s['maxItems'] -%}"
    "{%- if s['minItems'] == 1 -%}{{ '[1 ' ~ item ~ ']' }}"
    "{%- else -%}{{ '[' ~ s['minItems'] ~ ' ' ~ item ~ 's]' }}{%- endif -%}"
    "{%- else -%}{{ '[' ~ item ~ ', ...]' }}{%- endif -%}"
    "{%- elif s['type'] is defined and s['type'] is not string and s['type'] is iterable -%}"
    "{{ s['type'] | join('|') }}"
    "{%- elif s['type'] is defined and s['type'] -%}{{ s['type'] }}"
    "{%- else -%}any{%- endif -%}"
    "{%- endmacro -%}"
    "{%- macro signature(t) -%}"
    "{%- set f = t['function'] if 'function' in t else t -%}"
    "{%- set p = f['parameters'] if 'parameters' in f and f['parameters'] else {} -%}"
    "{%- set props = p['properties'] if 'properties' in p and p['properties'] else {} -%}"
    "{%- set req = p['required'] if 'required' in p and p['required'] else [] -%}"
    "{{ f['name'] }}("
    "{%- for key, s in props.items() -%}"
    "{{ ', ' if not loop.first }}{{ key }}: {{ type_text(s) }}"
    "{%- if 'description' in s and s['description'] and s['description'] | length <= 40 -%}"
    "{{ ' (' ~ s['description'] ~ ')' }}{%- endif -%}"
    "{%- if key not in req -%}"
    "{%- if 'default' in s -%}{{ ' = ' ~ (s['default'] | tojson) }}{%- else -%}?{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%})"
    "{%- set d = (f['description'] if 'description' in f and f['description'] else '') | trim -%}"
    "{%- if d -%}{{ ' - ' ~ d }}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- macro text_of(c) -%}"
    "{%- if c is none -%}"
    "{%- elif c is string -%}{{ c }}"
    "{%- else -%}"
    "{%- for part in c if part['type'] not in ['image', 'image_url'] and part['text'] -%}"
    "{{ '\\n' if not loop.first }}{{ part['text'] }}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
    "{%- macro call_text(c) -%}"
    "{%- set f = c['function'] if 'function' in c else c -%}"
    "{%- set a = f['arguments'] if 'arguments' in f else none -%}"
    "{{ '<tool_call>\\n{\"name\": ' ~ (f['name'] | tojson) ~ ', \"arguments\": ' }}"
    "{{- a if a is string else (a | tojson) }}{{ '}\\n</tool_call>' }}"
    "{%- endmacro -%}"
    "{%- set ns = namespace(block='', has_system=false) -%}"
    "{%- if tools -%}"
    "{%- set sigs -%}{%- for t in tools -%}{{ '\\n' if not loop.first }}{{ signature(t) }}"
    "{%- endfor -%}{%- endset -%}"
    "{%- set ns.block = " + _jinja_string(TOOL_HEADER) + " ~ sigs -%}"
    "{%- endif -%}"
    "{%- for m in messages -%}{%- if m['role'] == 'system' -%}{%- set ns.has_system = true -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if not messages or messages[0]['role'] != 'system' -%}"
    "{%- if ns.block and not ns.has_system -%}"
    "{{ '<|im_start|>system\\n' ~ ns.block ~ '<|im_end|>\\n' }}{%- set ns.block = '' -%}"
    "{%- else -%}{{ '<|im_start|>system\\n" + DEFAULT_SYSTEM + "<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- set content = text_of(m['content'] if 'content' in m else none) -%}"
    "{%- if m['role'] == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' -%}"
    "{{ '<|im_start|>user\\n' }}{%- else -%}{{ '\\n' }}{%- endif -%}"
    "{{ '<tool_response>\\n' ~ content ~ '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' -%}"
    "{{ '<|im_end|>\\n' }}{%- endif -%}"
    "{%- elif m['role'] == 'system' and ns.block -%}"
    "{{ '<|im_start|>system\\n' ~ (content ~ '\\n\\n' if content else '') ~ ns.block"
    " ~ '<|im_end|>\\n' }}{%- set ns.block = '' -%}"
    "{%- elif m['role'] == 'assistant' -%}"
    "{{ '<|im_start|>assistant\\n' ~ content }}"
    "{%- for c in (m['tool_calls'] if 'tool_calls' in m and m['tool_calls'] else []) -%}"
    "{{ '\\n' if content or not loop.first }}{{ call_text(c) }}"
    "{%- endfor -%}{{ '<|im_end|>\\n' }}"
    "{%- else -%}"
    "{{ '<|im_start|>' ~ m['role'] ~ '\\n' ~ content ~ '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)

# Ollama's TEMPLATE (Go text/template over .Messages and .Tools): the same turns; each tool a
# `name(arg: type, ...) - description` line (`?` marks an optional argument).
CHATML_TOOLS_OLLAMA = (
    '{{- $hasSystem := false }}{{- range .Messages }}{{- if eq .Role "system" }}'
    "{{- $hasSystem = true }}{{- end }}{{- end }}\n"
    "{{- define \"tools\" }}" + TOOL_HEADER +
    '{{ range $i, $t := . }}{{ if $i }}\n{{ end }}{{ $t.Function.Name }}('
    "{{- $first := true }}"
    "{{- range $k, $p := $t.Function.Parameters.Properties }}"
    '{{- if not $first }}, {{ end }}{{ $first = false }}{{ $k }}: '
    "{{- if $p.Enum }} {{ range $j, $e := $p.Enum }}{{ if $j }}|{{ end }}{{ json $e }}{{ end }}"
    "{{- else }} {{ $p.Type }}{{ end }}"
    "{{- if and $p.Description (le (len $p.Description) 40) }} ({{ $p.Description }}){{ end }}"
    "{{- $req := false }}{{ range $t.Function.Parameters.Required }}"
    "{{ if eq . $k }}{{ $req = true }}{{ end }}{{ end }}{{ if not $req }}?{{ end }}"
    "{{- end }})"
    "{{- if $t.Function.Description }} - {{ $t.Function.Description }}{{ end }}"
    "{{- end }}"
    "{{- end }}\n"
    "{{- $block := false }}{{ if .Tools }}{{ $block = true }}{{ end }}\n"
    "{{- if not $hasSystem }}<|im_start|>system\n"
    "{{ if .Tools }}{{ template \"tools\" .Tools }}{{ $block = false }}"
    "{{ else }}" + DEFAULT_SYSTEM + "{{ end }}<|im_end|>\n"
    "{{ end }}\n"
    "{{- range $i, $m := .Messages }}\n"
    '{{- $last := eq (len (slice $.Messages $i)) 1 }}\n'
    '{{- if eq .Role "system" }}<|im_start|>system\n'
    "{{ .Content }}{{ if $block }}{{ if .Content }}\n\n{{ end }}{{ template \"tools\" $.Tools }}"
    "{{ $block = false }}{{ end }}<|im_end|>\n"
    '{{ else if eq .Role "tool" }}<|im_start|>user\n'
    "<tool_response>\n{{ .Content }}\n</tool_response><|im_end|>\n"
    '{{ else if eq .Role "assistant" }}<|im_start|>assistant\n'
    "{{ .Content }}{{ range $j, $c := .ToolCalls }}{{ if or $m.Content $j }}\n{{ end }}"
    '<tool_call>\n{"name": "{{ $c.Function.Name }}", "arguments": {{ $c.Function.Arguments }}}'
    "\n</tool_call>{{ end }}{{ if not $last }}<|im_end|>\n{{ end }}"
    "{{ else }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
    '{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant\n{{ end }}'
    "{{- end }}"
)
