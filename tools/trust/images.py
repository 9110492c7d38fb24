"""Bounded image decoding: the pixel count a PNG's header claims is checked before any decode.

A PNG is a header plus a zlib stream, and zlib compresses a blank canvas about a thousandfold:
a 164 KB file can claim 10,000 x 10,000 pixels and decode to ~840 MB. Every PNG the trusted
side reads came from a worker (a render, a dataset built from renders), so its header is read
by hand here (signature, IHDR width, height, bit depth, colour type) and refused over the cap
before Pillow or Qt allocates a pixel. Pillow's own bomb guard (`MAX_IMAGE_PIXELS`) is also
set to the cap for any other format it is given, and checked on the lazy header read.
"""

from __future__ import annotations

import io
import math
import os
import struct
from pathlib import Path
from typing import Any

from tools.errors import ErrorKind, ToolError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The largest render the tools make is 2048 x 2048 (render_views' cap); 4096 x 4096 leaves
# room for a montage and is 64 MiB as RGBA. MODELWRIGHT_MAX_IMAGE_PIXELS overrides it.
MAX_PIXELS = int(os.environ.get("MODELWRIGHT_MAX_IMAGE_PIXELS", 4096 * 4096))
MAX_PNG_BYTES = 64 << 20  # a file over this is refused before it is read whole
_IHDR = struct.Struct(">I4sIIBB")  # chunk length, "IHDR", width, height, bit depth, colour type
_BIT_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
RENDER_DEFAULT_VIEWS = 4  # tools/worker/render.py DEFAULT_VIEWS: iso, front, top, right


class ImageError(ToolError):
    """An image that is not a PNG, is malformed, or claims more pixels than the cap."""

    def __init__(self, message: str):
        super().__init__(ErrorKind.VALIDATION, message)


def png_size(data: bytes, max_pixels: int | None = None) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR, or ImageError if it is not a PNG or is over the cap."""
    cap = MAX_PIXELS if max_pixels is None else max_pixels
    head = bytes(data[: len(PNG_SIGNATURE) + _IHDR.size])
    if not head.startswith(PNG_SIGNATURE) or len(head) < len(PNG_SIGNATURE) + _IHDR.size:
        raise ImageError("the image is not a PNG")
    length, tag, width, height, depth, colour = _IHDR.unpack_from(head, len(PNG_SIGNATURE))
    if tag != b"IHDR" or length != 13 or depth not in _BIT_DEPTHS.get(colour, ()):
        raise ImageError("the PNG has a malformed header")
    if width == 0 or height == 0 or width * height > cap:
        raise ImageError(f"the PNG claims {width} x {height} pixels; the cap is {cap} pixels")
    return width, height


def read_png_bytes(source: bytes | bytearray | str | os.PathLike) -> bytes:
    """The bytes of a PNG given as bytes or as a path, a path read with a size bound."""
    if isinstance(source, bytes | bytearray):
        return bytes(source)
    with open(source, "rb") as f:
        data = f.read(MAX_PNG_BYTES + 1)
    if len(data) > MAX_PNG_BYTES:
        raise ImageError(f"{Path(source).name} is over {MAX_PNG_BYTES} bytes")
    return data


def decode_png(source: bytes | bytearray | str | os.PathLike, mode: str | None = "RGB",
               max_pixels: int | None = None) -> Any:
    """A loaded PIL image from PNG bytes or a PNG file, its header checked before any decode;
    ImageError if it is not a PNG, is malformed, or is over the pixel cap."""
    data = read_png_bytes(source)
    width, height = png_size(data, max_pixels)

    def same_size(size: tuple[int, int]) -> None:
        if size != (width, height):
            raise ImageError("the PNG's header and its decoder disagree on its size")

    return _decode(data, ["PNG"], same_size, mode, "PNG")


def decode_image(source: bytes | bytearray | str | os.PathLike, mode: str | None = "RGB",
                 max_pixels: int | None = None) -> Any:
    """`decode_png` for a PNG; any other format Pillow reads is held to the same cap on the
    size its header gives (Pillow's open reads only the header), before it is loaded."""
    data = read_png_bytes(source)
    if data.startswith(PNG_SIGNATURE):
        return decode_png(data, mode, max_pixels)
    cap = MAX_PIXELS if max_pixels is None else max_pixels

    def under_cap(size: tuple[int, int]) -> None:
        width, height = size
        if width * height > cap:
            raise ImageError(f"the image claims {width} x {height} pixels; the cap is {cap} pixels")

    return _decode(data, None, under_cap, mode, "image")


def _decode(data: bytes, formats: list[str] | None, check: Any, mode: str | None,
            what: str) -> Any:
    """Open `data` (Pillow's open reads only the header), `check` the size it gives, and
    only then decode it."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    try:
        image = Image.open(io.BytesIO(data), formats=formats)
        check(image.size)
        image.load()
        return image.convert(mode) if mode else image
    except ImageError:
        raise
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise ImageError(f"the {what} does not decode: {e}") from None


def reencode_png(data: bytes, max_pixels: int | None = None) -> bytes:
    """`data` decoded under the cap and written anew as a plain PNG (no text or extra chunks)."""
    image = decode_png(data, mode=None, max_pixels=max_pixels)
    if image.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I;16"):
        image = image.convert("RGBA")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def expected_images(tool: str, args: dict) -> tuple[int, tuple[int, int]]:
    """How many images a tool call's reply carries and each one's (width, height), from the
    call as the trusted side validated it (tools.specs): a `render` sends one montage of its
    views (a grid of ceil(sqrt(n)) columns) or, untiled or through a camera, one image per
    view, each `size` square; every other tool sends none."""
    if tool != "render":
        return 0, (0, 0)
    size = int(args.get("size") or 256)
    views = 1 if args.get("camera") else len(args.get("views") or ()) or RENDER_DEFAULT_VIEWS
    if args.get("tiled", True) and views > 1:
        cols = math.ceil(math.sqrt(views))
        return 1, (cols * size, math.ceil(views / cols) * size)
    return views, (size, size)


def check_call_images(tool: str, args: dict, blobs: list[bytes]) -> None:
    """ImageError unless `blobs` are the images the call `tool(args)` makes: the count it
    sends, each a PNG of the size it draws (header and IHDR checked), no larger than such a
    PNG stored raw, and decoding whole to that size. A worker's render is the output of
    hostile code: nothing downstream (the store, a montage, a policy, the outbox) may meet
    one that is not what it claims."""
    count, (width, height) = expected_images(tool, args)
    if len(blobs) != count:
        raise ImageError(f"{tool} sent {len(blobs)} images, not the {count} it makes")
    # unfiltered RGBA rows, zlib's stored blocks and the chunks: the most such a PNG can take
    cap = 4 * width * height + height + (1 << 16)
    for i, blob in enumerate(blobs, 1):
        what = f"{tool} image {i} of {count}"
        if len(blob) > cap:
            raise ImageError(f"{what} is {len(blob)} bytes, over the {cap} a {width} x "
                             f"{height} PNG can take")
        try:
            size = png_size(blob)
            if size != (width, height):
                raise ImageError(f"its header claims {size[0]} x {size[1]} pixels, not the "
                                 f"{width} x {height} drawn")
            decode_png(blob, mode=None)
        except ImageError as e:
            raise ImageError(f"{what}: {e.message}") from None
