"""Blender-style G/R/S with a typed value: G (move), R (rotate) or S (scale), then X/Y/Z to
pick the axis, a number, Enter. The number is in the project's display unit (a move), degrees
(a turn) or a factor (a scale); Enter makes one `transform` call per selected object (one undo
step for all of them), Esc cancels. No Qt: the live view feeds keys in and shows `readout`."""

from __future__ import annotations

from studio.models.units import to_scene
from studio.viewport.gizmo import rotated_euler

KINDS = {"move": "Move", "rotate": "Rotate", "scale": "Scale"}
AXES = "XYZ"


class TypedTransform:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.axis: int | None = None
        self.text = ""

    def key(self, char: str) -> bool:
        """One typed character ('\\b' deletes); False when it means nothing here. X/Y/Z in
        either case choose the axis, '-' flips the sign and '+' makes it positive, ',' is a
        decimal point as '.' is."""
        if len(char) != 1:
            return False
        if char.upper() in AXES:
            self.axis = AXES.index(char.upper())
        elif char == "\b":
            self.text = self.text[:-1]
        elif char in "0123456789":
            self.text += char
        elif char in ".," and "." not in self.text:
            self.text += "."
        elif char == "-":
            self.text = self.text[1:] if self.text.startswith("-") else "-" + self.text
        elif char == "+":
            self.text = self.text.removeprefix("-")
        else:
            return False
        return True

    def value(self) -> float | None:
        try:
            return float(self.text)
        except ValueError:
            return None

    def readout(self, unit: str) -> str:
        axis = f" {AXES[self.axis]}" if self.axis is not None else ""
        suffix = {"move": f" {unit}", "rotate": "°", "scale": "×"}[self.kind]
        typed = f"{self.text or '…'}{suffix}"
        need = "  (X, Y or Z first)" if self.kind == "move" and self.axis is None else ""
        return f"{KINDS[self.kind]}{axis} {typed}{need} · Enter applies, Esc cancels"

    def amount(self, unit: str) -> float | None:
        """What the typed number means for the gizmo's maths: metres, degrees or a factor."""
        v = self.value()
        if v is None:
            return None
        return to_scene(v, unit) if self.kind == "move" else v

    def calls(self, objects: list[dict], unit: str) -> list[tuple[str, dict]]:
        """The transform calls for `objects` (the scene's dicts); ValueError says what is missing."""
        v = self.value()
        if v is None:
            raise ValueError(f"{KINDS[self.kind]}: type a number, then Enter")
        if self.kind == "move" and self.axis is None:
            raise ValueError("Move: press X, Y or Z to choose the axis, then type the distance")
        if self.kind == "scale" and v <= 0:
            raise ValueError("Scale: the factor must be above 0")
        out = []
        for obj in objects:
            args: dict = {"name": obj["name"]}
            if self.kind == "move":
                loc = [float(x) for x in obj.get("location", [0.0, 0.0, 0.0])]
                loc[self.axis] = round(loc[self.axis] + to_scene(v, unit), 6)
                args["location"] = loc
            elif self.kind == "rotate":  # no axis: about Z, as seen from above
                axis = 2 if self.axis is None else self.axis
                args["rotation_deg"] = rotated_euler(
                    obj.get("rotation_deg", [0.0, 0.0, 0.0]), axis, v
                )
            else:
                scale = [float(x) for x in obj.get("scale", [1.0, 1.0, 1.0])]
                for i in range(3) if self.axis is None else (self.axis,):
                    scale[i] = round(scale[i] * v, 6)
                args["scale"] = scale
            out.append(("transform", args))
        return out
