"""Decompressing a batch's records, for reading them back (``DataLog.records``, ListOffsets by
timestamp): the log itself never decompresses, it keeps the bytes the client sent.

gzip needs nothing more; snappy (raw, or in the xerial framing Kafka's Java client writes),
lz4 (frame format) and zstd need a library: ``cramjam`` serves all three, else
``python-snappy``, ``lz4``, ``zstandard``. Without one, ``NeedsCodec`` says which to install.
"""

from __future__ import annotations

import gzip
import struct

from groupcoord.adapters.storage.batches import FormatError

NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_XERIAL = b"\x82SNAPPY\x00"


class NeedsCodec(FormatError):
    """A codec whose library is not installed."""


def _cramjam():
    try:
        import cramjam  # type: ignore[import-not-found]
    except ImportError:
        return None
    return cramjam


def _snappy_block(data: bytes) -> bytes:
    cj = _cramjam()
    if cj is not None:
        return bytes(cj.snappy.decompress_raw(data))
    try:
        import snappy  # type: ignore[import-not-found]
    except ImportError:
        raise NeedsCodec("reading snappy batches needs cramjam or python-snappy: pip install cramjam") from None
    return snappy.decompress(data)


def _snappy(data: bytes) -> bytes:
    if not data.startswith(_XERIAL):
        return _snappy_block(data)
    out, pos = [], 16  # magic, version, compatible version
    while pos + 4 <= len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        out.append(_snappy_block(data[pos + 4:pos + 4 + n]))
        pos += 4 + n
    return b"".join(out)


def _lz4(data: bytes) -> bytes:
    cj = _cramjam()
    if cj is not None:
        return bytes(cj.lz4.decompress(data))
    try:
        import lz4.frame  # type: ignore[import-not-found]
    except ImportError:
        raise NeedsCodec("reading lz4 batches needs cramjam or lz4: pip install cramjam") from None
    return lz4.frame.decompress(data)


def _zstd(data: bytes) -> bytes:
    cj = _cramjam()
    if cj is not None:
        return bytes(cj.zstd.decompress(data))
    try:
        import zstandard  # type: ignore[import-not-found]
    except ImportError:
        raise NeedsCodec("reading zstd batches needs cramjam or zstandard: pip install cramjam") from None
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def decompress(codec: int, data: bytes) -> bytes:
    """The records' bytes of a batch body compressed with ``codec`` (the attributes' bits 0-2)."""
    try:
        if codec == 0:
            return data
        if codec == 1:
            return gzip.decompress(data)
        if codec == 2:
            return _snappy(data)
        if codec == 3:
            return _lz4(data)
        if codec == 4:
            return _zstd(data)
    except NeedsCodec:
        raise
    except Exception as e:  # each library has its own errors: one FormatError
        raise FormatError(f"cannot decompress a {NAMES[codec]} batch: {e}") from None
    raise FormatError(f"unknown compression codec {codec}")
