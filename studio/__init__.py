"""Modelwright Studio: the PySide6 desktop app (the only package that imports Qt).

`studio.app.run_studio` opens the window; `studio.commands` adds the `studio` command.
One folder per feature (agent, palette, outliner, history, tasks, episodes, training,
server, viewport); pure models in `studio.models`; the tool session in `studio.runtime`.
"""
