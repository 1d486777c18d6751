"""Deletion vectors decoded as Delta's protocol stores them: the protocol's own examples, framing and checksums,
64-bit row indexes; then vectors Delta itself wrote, against the rows Spark says were deleted."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtables.changes import deletion_vectors as dv
from dtables.changes.errors import CorruptDeletionVector
from dtables.changes import reader
from dtables.changes.log import DeltaLog, FileAction
from dtables.changes.storage import Storage

EXPECTED = [3, 4, 7, 11, 18, 29]  # the rows of the protocol's example vector


def _no_file(*_: Any) -> bytes:
    raise AssertionError("an inline vector reads no file")


def test_z85_is_zeromqs():
    assert dv.z85_decode("HelloWorld") == bytes.fromhex("864fd26fb559f75b")  # RFC 32's test vector
    with pytest.raises(CorruptDeletionVector, match="multiple of 5"):
        dv.z85_decode("Hell")
    with pytest.raises(CorruptDeletionVector, match="not a Z85 character"):
        dv.z85_decode("Hell~")


def test_file_names_from_the_uuid_and_prefix():
    with_prefix = dv.DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 4, 40, 6)
    assert with_prefix.relative_path() == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert with_prefix.location("s3://bucket/t/") == "s3://bucket/t/ab/deletion_vector_d2c639aa-8816-431a-aaf6-" \
                                                    "d3fe2512ff61.bin"
    plain = dv.DeletionVectorDescriptor("u", "R7QFX3rGXPFLhHGq&7g<", 1, 40, 6)
    assert plain.relative_path() == "deletion_vector_a52eda8c-0a57-4636-814b-9c165388f7ca.bin"
    absolute = dv.DeletionVectorDescriptor("p", "s3://x/deletion_vector_1.bin", 1, 40, 6)
    assert absolute.location("s3://bucket/t") == "s3://x/deletion_vector_1.bin"


@pytest.mark.parametrize("text, size", [
    ("^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 44),  # portable, as Delta writes today
    ("wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 40),  # native, the protocol's example
])
def test_inline_vectors_in_both_serializations(text: str, size: int):
    descriptor = dv.DeletionVectorDescriptor.from_action(
        {"storageType": "i", "pathOrInlineDv": text, "sizeInBytes": size, "cardinality": 6})
    assert list(dv.read_rows(descriptor, "/t", _no_file)) == EXPECTED


def test_a_file_holds_framed_checked_vectors_at_their_offsets(tmp_path: Path):
    first, second = dv.encode_bitmap_array([1, 2]), dv.encode_bitmap_array(EXPECTED)
    frame = [struct.pack(">i", len(b)) + b + struct.pack(">I", zlib.crc32(b)) for b in (first, second)]
    path = tmp_path / "deletion_vector_x.bin"
    path.write_bytes(bytes([dv.FILE_FORMAT_VERSION]) + frame[0] + frame[1])
    storage = Storage(None, str(tmp_path))
    descriptor = dv.DeletionVectorDescriptor("p", str(path), 1 + len(frame[0]), len(second), 6)
    assert list(dv.read_rows(descriptor, str(tmp_path), storage.read_bytes)) == EXPECTED
    with pytest.raises(CorruptDeletionVector, match="6 rows where its descriptor says 7"):
        dv.read_rows(dv.DeletionVectorDescriptor("p", str(path), 1 + len(frame[0]), len(second), 7),
                     str(tmp_path), storage.read_bytes)
    damaged = bytearray(path.read_bytes())
    damaged[-6] ^= 0xFF  # a bit of the second vector's bytes
    path.write_bytes(bytes(damaged))
    with pytest.raises(CorruptDeletionVector, match="checksum"):
        dv.read_rows(descriptor, str(tmp_path), storage.read_bytes)
    with pytest.raises(CorruptDeletionVector, match="ends early"):
        dv.read_rows(dv.DeletionVectorDescriptor("p", str(path), len(damaged) - 4, len(second), 6),
                     str(tmp_path), storage.read_bytes)


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(min_value=0, max_value=(5 << 32) - 1), max_size=300))
def test_row_indexes_beyond_32_bits_round_trip(rows: set[int]):
    assert list(dv.decode_bitmap_array(dv.encode_bitmap_array(sorted(rows)))) == sorted(rows)


def test_an_add_action_carries_its_descriptor():
    body = {"path": "p.parquet", "dataChange": True, "deletionVector": {
        "storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4, "sizeInBytes": 40,
        "cardinality": 6}}
    action = FileAction.from_json("add", body)
    assert action.has_deletion_vector and action.deletion_vector is not None
    assert action.deletion_vector.cardinality == 6 and action.deletion_vector.offset == 4
    assert FileAction.from_json("add", {"path": "q.parquet"}).deletion_vector is None


def test_vectors_delta_wrote_name_the_rows_spark_deleted(spark: Any, tmp_path: Path):
    """Delta writes a vector per file a DELETE touched; decoded here (through the local and the Hadoop file paths),
    it names exactly the row indexes (``_metadata.row_index``) of the rows the DELETE removed."""
    table = tmp_path / "t"
    ident = f"delta.`{table}`"
    spark.sql(f"CREATE TABLE {ident} (id INT) USING delta TBLPROPERTIES (delta.enableDeletionVectors = true)")
    spark.range(0, 2000).selectExpr("CAST(id AS INT) AS id").coalesce(1).write.format("delta").mode("append") \
        .save(str(table))
    positions = {r.id: r.row_index for r in spark.sql(
        f"SELECT id, _metadata.row_index AS row_index FROM {ident}").collect()}
    spark.sql(f"DELETE FROM {ident} WHERE id % 7 = 3 OR id IN (5, 1999)")
    deleted = sorted(positions[i] for i in positions if i % 7 == 3 or i in (5, 1999))
    spark.sql(f"DELETE FROM {ident} WHERE id = 6")  # the vector grows: the new one holds the old rows too
    commits = sorted((table / "_delta_log").glob("*.json"))
    adds = [FileAction.from_json("add", a["add"]) for a in map(json.loads, commits[-1].read_text().splitlines())
            if "add" in a]
    [action] = [a for a in adds if a.deletion_vector is not None]
    assert action.deletion_vector is not None
    local = Storage(spark, str(table))
    rows = dv.read_rows(action.deletion_vector, str(table), local.read_bytes)
    assert list(rows) == sorted([*deleted, positions[6]])
    remote = Storage(spark, table.as_uri())
    remote._local = False  # Hadoop's file system, as for object stores
    assert dv.read_rows(action.deletion_vector, table.as_uri(), remote.read_bytes) == rows


def test_table_at_leaves_out_marked_rows_directly_or_through_delta(spark: Any, tmp_path: Path, monkeypatch: Any):
    """``table_at`` reads a version's files directly without the rows their vectors mark, and past
    MAX_DIRECT_MARKS marked rows through Delta's own scan: both give Delta's rows."""
    table = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{table}` (id INT) USING delta TBLPROPERTIES ("
              "delta.enableDeletionVectors = true, delta.enableRowTracking = true)")
    spark.range(0, 500).selectExpr("CAST(id AS INT) AS id").coalesce(1).write.format("delta").mode("append") \
        .save(table)
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id % 5 = 1")
    log = DeltaLog(spark, table)
    version = log.latest_version
    files = log.files_at(version)  # the checksum lists them: the direct read is possible
    assert files and any(f.deletion_vector is not None for f in files)
    expected = sorted(r.id for r in spark.read.format("delta").load(table).collect())
    assert len(expected) == 400
    for limit in (reader.MAX_DIRECT_MARKS, 0):
        monkeypatch.setattr(reader, "MAX_DIRECT_MARKS", limit)
        assert sorted(r.id for r in reader.table_at(spark, table, version).collect()) == expected


def test_a_truncated_portable_vector_is_reported_corrupt():
    data = dv.encode_bitmap_array([1, 5, (2 << 32) + 7])
    assert list(dv.decode_bitmap_array(data)) == [1, 5, (2 << 32) + 7]
    with pytest.raises(CorruptDeletionVector, match="does not decode"):
        dv.decode_bitmap_array(data[:-3])


@settings(max_examples=50, deadline=None)
@given(st.sets(st.integers(min_value=0, max_value=(3 << 32) - 1), max_size=200),
       st.sets(st.integers(min_value=0, max_value=(3 << 32) - 1), max_size=200))
def test_the_rows_a_grown_vector_adds_are_its_difference_as_bitmaps(old: set[int], added: set[int]):
    """What a change read picks out of a file whose vector grew: the new vector's rows less the old one's, computed
    on the decoded bitmaps, as a set difference of the row indexes would give."""
    before = dv.decode_bitmap_array(dv.encode_bitmap_array(sorted(old)))
    after = dv.decode_bitmap_array(dv.encode_bitmap_array(sorted(old | added)))
    assert list(after - before) == sorted(added - old)
