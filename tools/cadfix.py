"""One CadQuery repair shared by the worker's CAD tools and the trusted side's geometry checks.

CadQuery and OCP are imported inside the function: importing this module costs nothing.
"""

from __future__ import annotations

from typing import Any


def fixed_solids(shape: Any) -> Any:
    """The shape's solids after ShapeFix_Solid (one solid, or a compound of several).

    Shelled solids straight from `shell()` can carry a shell orientation that makes OCCT's
    booleans return faces and no solid (a boss fused on, a handle swept onto the part, an IoU's
    intersection); fixing them first makes the booleans dependable.
    """
    import cadquery as cq
    from OCP.ShapeFix import ShapeFix_Solid

    out = []
    for solid in shape.Solids():
        fix = ShapeFix_Solid(solid.wrapped)
        fix.Perform()
        out.append(cq.Shape.cast(fix.Solid()))
    return out[0] if len(out) == 1 else cq.Compound.makeCompound(out)
