"""The `modelwright tools ...` commands, their diagnostics, and how every command ends.

- `commands`: the `tools` group (`list`, `run`, `doctor`, `stress`), mounted by studio/cli.py
- `doctor`: start one worker and report its jail as measured from inside
- `fuzz`: generated input for `tools stress` (schema-driven fuzzing) and big scenes in one
  call (`write_cubes`, for the scale tests and the runtime benchmark)
- `exits`: the one exit-code convention and one-line errors of every `modelwright` command
  (the other layers' commands use it too)

Kept light: importing `tools.cli.exits` loads neither typer nor the supervisor.
"""
