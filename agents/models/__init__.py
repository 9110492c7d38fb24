"""Local models by name: the packaged base, converted GGUF files, folders, hub ids, adapters.

`registry` is the catalogue (`modelwright models ...`, `cli`), `source` resolves a name or a
path to something `from_pretrained` loads, `files` and `convert` read and convert model files
(they are someone else's: see docs/SECURITY.md).
"""
