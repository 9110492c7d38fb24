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


def revolutions_as_bsplines(shape: Any) -> Any:
    """The shape with its surfaces of revolution rewritten as exact B-spline surfaces.

    A sweep with `transition="round"` along a polyline rounds each corner with a surface of
    revolution. OCCT 7.9 writes that surface to STEP and reads it back wrong (a 4 mm rod bent
    once: 3,500 mm³ saved, 3,232 mm³ reloaded; the corner's face 150.8 mm² instead of 50.3), so
    a user's export and the checker's reload both got another part. The B-spline form is exact,
    keeps every other face's type (planes stay planes, cylinders cylinders) and reloads to the
    same volume (docs/TASKS.md, sweeps_lofts).
    """
    import cadquery as cq
    from OCP.ShapeCustom import ShapeCustom

    if not any(f.geomType() == "REVOLUTION" for f in shape.Faces()):
        return shape
    return cq.Shape.cast(ShapeCustom.ConvertToBSpline_s(shape.wrapped, False, True, False, False))
