"""Outliner: the scene's objects as the runtime reports them (`get_scene`).

Select (shared with the palette: the selected name fills `name` fields), rename (edit the
name in place: a `rename` call), delete (a `delete` call), show/hide (the checkbox: a
`set_visible` call). Each edit is one tool call, so it is one undo step and one recorded step.
"""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from studio.foreign import tooltip
from studio.models.units import display_unit, location_text, size_text
from tools.text import printable_line


class OutlinerDock(QWidget):
    def __init__(self, controller, parent=None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Object", "Type", "Size", "Location"])
        self.tree.setRootIsDecorated(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)  # shift/ctrl-click
        self.tree.itemSelectionChanged.connect(self._selection_from_tree)
        self.tree.itemChanged.connect(self._renamed)
        rename, delete = QPushButton("Rename"), QPushButton("Delete")
        rename.clicked.connect(self._edit_selected)
        delete.clicked.connect(self.delete_selected)
        row = QHBoxLayout()
        row.addWidget(rename)
        row.addWidget(delete)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tree, 1)
        layout.addLayout(row)
        self._filling = False
        controller.scene.changed.connect(self.fill)
        controller.scene.selection_changed.connect(self._select_in_tree)

    def fill(self) -> None:
        self._filling = True
        try:
            self.tree.clear()
            items: dict[str, QTreeWidgetItem] = {}
            objects = self.controller.scene.objects
            unit = display_unit(objects, getattr(self.controller.scene, "units", "auto"))  # one for every row
            for obj in objects:
                kind = f"{obj.get('type', '')} ({obj.get('source', '')})"
                # names are the worker's: escaped (the real name stays in UserRole)
                item = QTreeWidgetItem([printable_line(t) for t in (obj["name"], kind, size_text(obj, unit),
                                                                    location_text(obj, unit))])
                item.setData(0, Qt.ItemDataRole.UserRole, obj["name"])
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable | Qt.ItemFlag.ItemIsUserCheckable)
                item.setCheckState(0, Qt.CheckState.Checked if obj.get("visible", True) else Qt.CheckState.Unchecked)
                item.setToolTip(1, "untick the box to hide the object in renders")
                color = (obj.get("material") or {}).get("color")
                if color:
                    item.setToolTip(0, tooltip(f"material {color}"))
                items[obj["name"]] = item
            for obj in objects:
                parent = items.get(obj.get("parent") or "")
                (parent.addChild if parent else self.tree.addTopLevelItem)(items[obj["name"]])
            self.tree.expandAll()
            for col in range(4):
                self.tree.resizeColumnToContents(col)
            self._select_in_tree(self.controller.scene.selected)
        finally:
            self._filling = False

    def wanted_width(self) -> int:
        """Wide enough for the four columns with typical rows (the dock opens this wide)."""
        fm = self.tree.fontMetrics()
        sample = ("Cylinder.001  ", "MESH (blender)", "100 × 70 × 10 mm", "(0.125, -0.09, 0.003) m")
        return min(520, sum(fm.horizontalAdvance(t) + 24 for t in sample) + 40)

    def names(self) -> list[str]:
        out = []

        def walk(item: QTreeWidgetItem) -> None:
            out.append(item.text(0))
            for i in range(item.childCount()):
                walk(item.child(i))

        for i in range(self.tree.topLevelItemCount()):
            walk(self.tree.topLevelItem(i))
        return sorted(out)

    def _find(self, name: str | None) -> QTreeWidgetItem | None:
        if not name:
            return None
        every = self.tree.findItems("*", Qt.MatchFlag.MatchWildcard | Qt.MatchFlag.MatchRecursive, 0)
        return next((i for i in every if i.data(0, Qt.ItemDataRole.UserRole) == name), None)

    def _select_in_tree(self, name: str | None) -> None:
        """The scene's whole selection, `name` (the active one) current."""
        was, self._filling = self._filling, True
        try:
            self.tree.clearSelection()
            for other in self.controller.scene.selection:
                found = self._find(other)
                if found is not None:
                    found.setSelected(True)
            item = self._find(name)
            if item is not None:
                self.tree.setCurrentItem(item, 0, QItemSelectionModel.SelectionFlag.Select)
        finally:
            self._filling = was

    def _selection_from_tree(self) -> None:
        if self._filling:
            return
        names = [i.data(0, Qt.ItemDataRole.UserRole) for i in self.tree.selectedItems()]
        current = self.tree.currentItem()
        active = current.data(0, Qt.ItemDataRole.UserRole) if current is not None else None
        if active in names:  # the one clicked last is the active one
            names = [n for n in names if n != active] + [active]
        self.controller.scene.select_many(names)

    def _edit_selected(self) -> None:
        item = self._find(self.controller.scene.selected)
        if item:
            self.tree.editItem(item, 0)

    def _renamed(self, item: QTreeWidgetItem, column: int) -> None:
        if self._filling or column != 0:
            return
        old, new = item.data(0, Qt.ItemDataRole.UserRole), item.text(0).strip()
        if new and new != printable_line(old):  # shown escaped: an unedited name is not a rename
            self.rename(old, new)
            return
        visible = item.checkState(0) == Qt.CheckState.Checked
        shown = next((o.get("visible", True) for o in self.controller.scene.objects if o["name"] == old), True)
        if visible != shown:
            self.set_visible(old, visible)

    def set_visible(self, name: str, visible: bool) -> None:
        self.controller.manual_call("set_visible", {"name": name, "visible": visible})

    def rename(self, old: str, new: str) -> None:
        error = self.controller.validate("rename", {"name": old, "new_name": new})
        if error:
            self.controller.sig_error.emit(error)
            self.fill()
            return
        self.controller.manual_call("rename", {"name": old, "new_name": new})

    def delete_selected(self) -> None:
        names = self.controller.scene.selection
        if names:
            label = names[0] if len(names) == 1 else f"{len(names)} objects"
            self.controller.manual_calls([("delete", {"name": n}) for n in names], f"delete {label}")
