"""Content decoding for the measuring client: an incremental decompressor per Content-Encoding."""
from __future__ import annotations

import zlib
from typing import Any


def decoder_for(encoding: str | None) -> Any:
    """An incremental decompressor for the Content-Encoding, or None for identity."""
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return _Deflate()
    return None


class _Deflate:
    """`deflate` is meant to be zlib-wrapped, but some servers send raw deflate: accept both."""

    def __init__(self) -> None:
        self._d: Any = None
        self._first = b""

    def decompress(self, data: bytes) -> bytes:
        if self._d is None:
            self._first += data
            if len(self._first) < 2:
                return b""
            zlib_header = (self._first[0] & 0x0F) == 8 and int.from_bytes(self._first[:2], "big") % 31 == 0
            self._d = zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)
            data, self._first = self._first, b""
        return self._d.decompress(data)
