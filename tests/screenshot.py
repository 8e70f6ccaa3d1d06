"""Headless Chromium for the HTML report tests: a screenshot and its pixels, and the page's laid-out DOM.

The reports promise a person something to look at, so the tests open them in a real browser (Debian
``chromium``, installed by ``make deps``) rather than only parsing the markup. PNG decoding is done here in
pure Python (8-bit greyscale, RGB or RGBA, non-interlaced: what Chromium writes), so no image library is needed.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium() -> str:
    """The browser binary, or skip the test saying how to get one."""
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium; `make deps` does it)")


def _run(args: list[str], timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="fg-chromium-") as profile:
        cmd = [
            chromium(),
            "--headless",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",  # a private profile: parallel runs never share a lock
            *(["--no-sandbox"] if os.geteuid() == 0 else []),  # Chromium refuses root without it
            *args,
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def screenshot(page: Path, png: Path, width: int, height: int) -> Path:
    """Render ``page`` in a ``width`` x ``height`` window and write a PNG of it."""
    r = _run([f"--screenshot={png}", f"--window-size={width},{height}", page.resolve().as_uri()])
    assert png.is_file(), f"chromium wrote no screenshot (exit {r.returncode}): {r.stderr[-800:]}"
    return png


def dump_dom(page: Path) -> str:
    """The DOM after Chromium laid the page out and ran its scripts (what ``--dump-dom`` prints)."""
    r = _run(["--dump-dom", page.resolve().as_uri()])
    assert r.returncode == 0 and "<html" in r.stdout, f"chromium --dump-dom failed: {r.stderr[-800:]}"
    return r.stdout


@dataclass
class Image:
    width: int
    height: int
    rows: list[bytes]  # RGB, 3 bytes a pixel

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        r, g, b = self.rows[y][3 * x : 3 * x + 3]
        return r, g, b

    def count(self, pred: object, *, step: int = 1, box: tuple[int, int, int, int] | None = None) -> int:
        """Pixels (sampled every ``step`` in x and y) for which ``pred((r, g, b))`` holds, in ``box``."""
        x0, y0, x1, y1 = box or (0, 0, self.width, self.height)
        n = 0
        for y in range(y0, y1, step):
            row = self.rows[y]
            for x in range(x0, x1, step):
                if pred((row[3 * x], row[3 * x + 1], row[3 * x + 2])):  # type: ignore[operator]
                    n += 1
        return n


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read_png(path: Path) -> Image:
    """Decode an 8-bit, non-interlaced greyscale/RGB/RGBA PNG into RGB rows."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, ihdr = 8, bytearray(), None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert ihdr is not None, f"{path} has no IHDR"
    width, height, depth, ctype, _comp, _filt, interlace = ihdr
    channels = {0: 1, 2: 3, 6: 4}.get(ctype)
    assert depth == 8 and channels and not interlace, f"{path}: unsupported PNG (depth {depth}, type {ctype})"
    raw = zlib.decompress(bytes(idat))
    stride = width * channels
    prev = bytearray(stride)
    rows: list[bytes] = []
    bpp = channels
    for y in range(height):
        off = y * (stride + 1)
        ftype = raw[off]
        line = bytearray(raw[off + 1 : off + 1 + stride])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=True))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                if i >= bpp:
                    line[i] = (line[i] + _paeth(line[i - bpp], prev[i], prev[i - bpp])) & 0xFF
                else:
                    line[i] = (line[i] + prev[i]) & 0xFF
        prev = line
        if channels == 3:
            rows.append(bytes(line))
        elif channels == 4:
            rows.append(bytes(b for i, b in enumerate(line) if i % 4 != 3))
        else:
            rows.append(bytes(v for v in line for _ in range(3)))
    return Image(width, height, rows)


def is_ink(rgb: tuple[int, int, int]) -> bool:
    """Anything visibly not white or near-white background."""
    return min(rgb) < 235
