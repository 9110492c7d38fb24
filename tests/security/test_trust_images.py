"""PNG decoding on the trusted side is bounded: a header claiming more pixels than the cap
is refused before any pixel is allocated, in every loader that reads a worker's renders."""

from __future__ import annotations

import base64
import io
import json
import struct
import subprocess
import sys
import zlib

import pytest

from tools.trust import images


def _chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))


def png(width: int, height: int, idat: bytes = b"") -> bytes:
    """A greyscale 8-bit PNG with this header and IDAT (a header alone when `idat` is empty)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return images.PNG_SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def bomb(side: int = 10_000) -> bytes:
    """A valid side x side black PNG: ~100 KB that decodes to side² bytes (x3 as RGB)."""
    z = zlib.compressobj(9)
    row = b"\0" * (side + 1)
    return png(side, side, b"".join(z.compress(row) for _ in range(side)) + z.flush())


def small() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 20, 30)).save(out, "PNG")
    return out.getvalue()


def test_a_header_over_the_cap_is_refused_by_every_loader():
    from agents.policies.hf_policy import decode_image
    from agents.policies.protocol import PolicyError
    from training.sft.data import DatasetError, to_pil

    claim = png(50_000, 50_000)
    url = "data:image/png;base64," + base64.b64encode(claim).decode()
    with pytest.raises(PolicyError, match="claims 50000 x 50000 pixels"):
        decode_image({"type": "image_url", "image_url": {"url": url}})
    with pytest.raises(PolicyError, match="claims 50000 x 50000"):
        decode_image({"type": "image", "image": claim})
    with pytest.raises(DatasetError, match="claims 50000 x 50000"):
        to_pil({"bytes": claim})
    with pytest.raises(images.ImageError, match="claims 50000 x 50000"):
        images.reencode_png(claim)
    assert decode_image({"type": "image", "image": small()}).size == (64, 48)
    assert to_pil(small()).size == (64, 48)


def test_a_file_on_disk_is_checked_too(tmp_path):
    from training.sft.data import DatasetError, to_pil

    (tmp_path / "b.png").write_bytes(png(50_000, 50_000))
    with pytest.raises(DatasetError, match="claims"):
        to_pil(str(tmp_path / "b.png"))


@pytest.mark.parametrize("data, why", [
    (b"GIF89a" + b"\0" * 40, "not a PNG"),
    (images.PNG_SIGNATURE + b"\0" * 30, "malformed"),
    (png(0, 10), "claims 0 x 10"),
])
def test_a_malformed_header_is_refused(data, why):
    with pytest.raises(images.ImageError, match=why):
        images.decode_png(data)


PROBE = """
import resource, sys
from training.sft.data import DatasetError, to_pil
data = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    to_pil(data)
    print("decoded")
except DatasetError as e:
    print("refused:", e)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_a_real_bomb_is_refused_without_allocating_its_pixels(tmp_path):
    """A valid ~100 KB PNG of 10,000 x 10,000 pixels: refused, and the loader's peak memory
    grows by far less than the 100 MB (300 MB as RGB) its pixels would take."""
    data = bomb()
    assert len(data) < 200_000
    (tmp_path / "bomb.png").write_bytes(data)
    p = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "bomb.png")], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    verdict, grown_mb = p.stdout.strip().splitlines()[-2:]
    assert verdict.startswith("refused:") and "10000 x 10000" in verdict
    assert int(grown_mb) < 50, (verdict, grown_mb)


def test_reencode_keeps_pixels_and_drops_extra_chunks():
    from PIL import Image

    data = small()
    text = _chunk(b"tEXt", b"Comment\0" + b"x" * 100)
    with_text = data[:33] + text + data[33:]
    out = images.reencode_png(with_text)
    assert b"tEXt" not in out
    assert Image.open(io.BytesIO(out)).convert("RGB").tobytes() == Image.open(io.BytesIO(data)).convert("RGB").tobytes()
    json.dumps(images.png_size(out))
