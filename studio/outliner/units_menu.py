"""View → Units: the project's display unit (Auto: mm when a part was authored in mm, else m).

The choice is kept in the studio's QSettings (`units`) and saved with a project (its view),
so opening a project brings its unit back. Changing it redraws every row, readout and typed
value in the new unit."""

from __future__ import annotations

from PySide6.QtGui import QAction, QActionGroup

from studio.models.units import CHOICES

LABELS = {"auto": "Auto (mm for parts authored in mm)", "mm": "Millimetres (mm)", "m": "Metres (m)"}
KEY = "units"


def unit_actions(menu, scene, settings) -> QActionGroup:
    chosen = str(settings.value(KEY, "auto"))
    scene.units = chosen if chosen in CHOICES else "auto"
    group = QActionGroup(menu)
    group.setExclusive(True)
    for choice in CHOICES:
        action = QAction(LABELS[choice], menu, checkable=True)
        action.setData(choice)
        action.setChecked(choice == scene.units)
        action.triggered.connect(lambda _=False, c=choice: set_units(scene, settings, c))
        group.addAction(action)
        menu.addAction(action)
    return group


def set_units(scene, settings, choice: str, group: QActionGroup | None = None) -> None:
    scene.units = choice if choice in CHOICES else "auto"
    settings.setValue(KEY, scene.units)
    for action in group.actions() if group is not None else ():
        action.setChecked(action.data() == scene.units)
    scene.changed.emit()  # the outliner fills again in the new unit
