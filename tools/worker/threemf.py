"""3MF, the 3D-printing package: a zip holding one XML mesh model (3MF core spec 1.x).

Written with the standard library only (zipfile and XML escaping): each object becomes one
mesh `object` in world coordinates, so the build places every item at the identity, and
slicers read the units from `unit` (millimetre, as the STEP export uses).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Sequence
from xml.sax.saxutils import quoteattr

CORE_NS = "http://schemas.microsoft.com/3dmanufacturing/core/2015/02"
MODEL_PATH = "3D/3dmodel.model"
_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" '
    'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="model" '
    'ContentType="application/vnd.ms-package.3dmanufacturing-3dmodel+xml"/>'
    "</Types>\n"
)
_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    f'<Relationship Target="/{MODEL_PATH}" Id="rel0" '
    'Type="http://schemas.microsoft.com/3dmanufacturing/2013/01/3dmodel"/>'
    "</Relationships>\n"
)

Mesh = tuple[str, Sequence[Sequence[float]], Sequence[Sequence[int]]]  # name, vertices, triangles


def _num(x: float) -> str:
    return format(float(x), ".9g")  # 9 digits: a micrometre on a part metres long


def model_xml(meshes: Iterable[Mesh], unit: str = "millimeter") -> str:
    """The model part: one object per mesh, each built once at the identity."""
    out = [
        f'<?xml version="1.0" encoding="UTF-8"?>\n<model unit="{unit}" xml:lang="en-US" '
        f'xmlns="{CORE_NS}"><resources>'
    ]
    ids = []
    for i, (name, vertices, triangles) in enumerate(meshes, start=1):
        ids.append(i)
        out.append(f'<object id="{i}" type="model" name={quoteattr(name)}><mesh><vertices>')
        out.extend(f'<vertex x="{_num(x)}" y="{_num(y)}" z="{_num(z)}"/>' for x, y, z in vertices)
        out.append("</vertices><triangles>")
        out.extend(f'<triangle v1="{a}" v2="{b}" v3="{c}"/>' for a, b, c in triangles)
        out.append("</triangles></mesh></object>")
    out.append("</resources><build>")
    out.extend(f'<item objectid="{i}"/>' for i in ids)
    out.append("</build></model>\n")
    return "".join(out)


def write_3mf(path: str, meshes: Iterable[Mesh], unit: str = "millimeter") -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", _CONTENT_TYPES)
        z.writestr("_rels/.rels", _RELS)
        z.writestr(MODEL_PATH, model_xml(meshes, unit))
