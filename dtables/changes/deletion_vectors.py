"""Deletion vectors as Delta's protocol stores them (PROTOCOL.md, "Deletion Vectors"), decoded without Spark.

A file's deletion vector is the set of its row indexes (0-based positions in the Parquet file) that are deleted. An
``add`` action names it with a descriptor:

- ``storageType`` ``u``: a file ``<table>/<prefix>/deletion_vector_<uuid>.bin``; ``pathOrInlineDv`` is the prefix
  followed by the UUID in Z85 (20 characters);
- ``p``: a file at the absolute path ``pathOrInlineDv``;
- ``i``: inline, ``pathOrInlineDv`` is the serialized bitmap in Z85;

with ``offset`` (where the vector starts in the file), ``sizeInBytes`` and ``cardinality``. In a file, each vector is
framed as a 4-byte big-endian size, the bytes, then a 4-byte big-endian CRC-32 of the bytes; the file starts with a
version byte (1). The bytes are a ``RoaringBitmapArray``: a magic number, then 64-bit row indexes as 32-bit roaring
bitmaps keyed by their high 32 bits, each in roaring's portable format. That layout after the magic number is
CRoaring's own portable format of 64-bit bitmaps, so pyroaring's ``BitMap64`` decodes it in C: a vector is a
bitmap, never a Python list of its rows. A file's vector holds every row ever deleted from it, so a change read that
wants the few rows one commit added (``new - old``) must not pay per row of its history: a vector of 1.4 million rows
took 72 ms to decode into a list, 0.3 ms as a bitmap (bench/README.md).

Change reads use this to find the rows a commit deleted from a file without rewriting it: the rows in the file's
new vector that were not in its old one.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyroaring import BitMap, BitMap64

from dtables.changes.errors import CorruptDeletionVector

PORTABLE_MAGIC = 1681511377  # RoaringBitmapArray, portable serialization (what Delta writes)
NATIVE_MAGIC = 1681511376  # the older native serialization, which readers must still accept
FILE_FORMAT_VERSION = 1
Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(Z85_ALPHABET)}
UUID_Z85_LENGTH = 20


def z85_decode(text: str, size: int | None = None) -> bytes:
    """Z85 (ZeroMQ RFC 32) to bytes. Delta pads its input to a multiple of 4 bytes before encoding, so ``size``
    (the descriptor's ``sizeInBytes``) cuts the padding off."""
    if len(text) % 5:
        raise CorruptDeletionVector(f"a Z85 text has a length that is not a multiple of 5: {len(text)}")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for c in text[start:start + 5]:
            digit = _Z85_VALUE.get(c)
            if digit is None:
                raise CorruptDeletionVector(f"{c!r} is not a Z85 character")
            value = value * 85 + digit
        if value >= 1 << 32:
            raise CorruptDeletionVector(f"Z85 group {text[start:start + 5]!r} does not fit in 4 bytes")
        out += value.to_bytes(4, "big")
    return bytes(out[:size] if size is not None else out)


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    storage_type: str  # u, p or i
    path_or_inline_dv: str
    offset: int | None
    size_in_bytes: int
    cardinality: int

    @classmethod
    def from_action(cls, body: Mapping[str, Any]) -> DeletionVectorDescriptor:
        """From the ``deletionVector`` object of an add or remove action."""
        return cls(storage_type=body["storageType"], path_or_inline_dv=body["pathOrInlineDv"],
                   offset=body.get("offset"), size_in_bytes=int(body["sizeInBytes"]),
                   cardinality=int(body["cardinality"]))

    @property
    def unique_id(self) -> str:
        """What identifies this vector among a table's (the protocol's ``uniqueId``): two descriptors with the same
        id hold the same rows."""
        return self.storage_type + self.path_or_inline_dv + (f"@{self.offset}" if self.offset is not None else "")

    def relative_path(self) -> str:
        """For ``u``: the vector file's path relative to the table root, ``[<prefix>/]deletion_vector_<uuid>.bin``."""
        if self.storage_type != "u":
            raise CorruptDeletionVector(f"deletion vector of storage type {self.storage_type!r} has no relative path")
        prefix = self.path_or_inline_dv[:-UUID_Z85_LENGTH]
        encoded = self.path_or_inline_dv[-UUID_Z85_LENGTH:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
        return f"{prefix}/{name}" if prefix else name

    def location(self, table_root: str) -> str | None:
        """Where the vector's file is (``table_root`` joined with the relative path, or the absolute path); None when
        it is inline."""
        if self.storage_type == "i":
            return None
        if self.storage_type == "p":
            return self.path_or_inline_dv
        if self.storage_type == "u":
            return f"{table_root.rstrip('/')}/{self.relative_path()}"
        raise CorruptDeletionVector(f"unknown deletion vector storage type {self.storage_type!r}")


def read_rows(descriptor: DeletionVectorDescriptor, table_root: str,
              read_bytes: Callable[[str, int, int], bytes]) -> BitMap64:
    """The deleted row indexes of one vector (iterated ascending). ``read_bytes(location, start, length)`` reads
    part of a file (local or remote: the caller decides how)."""
    if descriptor.storage_type == "i":
        data = z85_decode(descriptor.path_or_inline_dv, descriptor.size_in_bytes)
    else:
        location = descriptor.location(table_root)
        assert location is not None
        start = descriptor.offset if descriptor.offset is not None else 1  # after the version byte
        framed = read_bytes(location, start, descriptor.size_in_bytes + 8)
        data = unframe(framed, descriptor.size_in_bytes, location)
    rows = decode_bitmap_array(data)
    if len(rows) != descriptor.cardinality:
        raise CorruptDeletionVector(f"deletion vector {descriptor.unique_id}: {len(rows)} rows where its descriptor "
                                    f"says {descriptor.cardinality}")
    return rows


def unframe(framed: bytes, size: int, where: str) -> bytes:
    """The vector's bytes out of ``size (4 bytes) + bytes + CRC-32 (4 bytes)``, checked."""
    if len(framed) < size + 8:
        raise CorruptDeletionVector(f"deletion vector file {where} ends early: {len(framed)} of {size + 8} bytes")
    (stored_size,) = struct.unpack(">i", framed[:4])
    if stored_size != size:
        raise CorruptDeletionVector(f"deletion vector in {where}: size {stored_size} where its descriptor says {size}")
    data = framed[4:4 + size]
    (checksum,) = struct.unpack(">I", framed[4 + size:8 + size])
    if zlib.crc32(data) != checksum:
        raise CorruptDeletionVector(f"deletion vector in {where}: checksum mismatch (corrupt file)")
    return data


def decode_bitmap_array(data: bytes) -> BitMap64:
    """A serialized RoaringBitmapArray to the bitmap of its 64-bit row indexes."""
    if len(data) < 4:
        raise CorruptDeletionVector("deletion vector too short for its magic number")
    (magic,) = struct.unpack_from("<i", data, 0)
    (magic_big_endian,) = struct.unpack_from(">i", data, 0)
    if magic == PORTABLE_MAGIC:
        try:
            return BitMap64.deserialize(data[4:])
        except ValueError as e:  # CRoaring checks the bytes against their own sizes while it reads them
            raise CorruptDeletionVector(f"deletion vector that does not decode: {e}") from None
    if NATIVE_MAGIC not in (magic, magic_big_endian):
        raise CorruptDeletionVector(f"deletion vector with unknown magic number {magic}")
    rows = BitMap64()
    for high, bitmap in _native(data, "<" if magic == NATIVE_MAGIC else ">"):  # older writers: rare, and small
        base = high << 32
        rows.update(base | low for low in bitmap)
    return rows


def _native(data: bytes, order: str) -> Iterator[tuple[int, BitMap]]:
    """Older writers: an int count, then per bitmap an int size and its bytes, keyed by position. Delta writes the
    ints little-endian; the protocol's own inline example has them big-endian, so both are read."""
    (count,) = struct.unpack_from(order + "i", data, 4)
    pos = 8
    for high in range(count):
        (size,) = struct.unpack_from(order + "i", data, pos)
        pos += 4
        yield high, BitMap.deserialize(data[pos:pos + size])
        pos += size


def encode_bitmap_array(rows: list[int]) -> bytes:
    """The portable RoaringBitmapArray of ``rows``, as Delta writes it (for tests and for writing vectors)."""
    by_high: dict[int, list[int]] = {}
    for r in rows:
        by_high.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    highs = range(max(by_high) + 1) if by_high else range(0)
    out = bytearray(struct.pack("<iq", PORTABLE_MAGIC, len(highs)))
    for high in highs:
        out += struct.pack("<I", high) + BitMap(by_high.get(high, [])).serialize()
    return bytes(out)
