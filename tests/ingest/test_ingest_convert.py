"""Seed 004's type table: the conversions each column type accepts, and a bad value of each type (no Spark job)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import types as T

from dtables.ingest.convert import ColumnProblem, ConvertedRow, ConvertOptions, RowConverter

UTC = dt.timezone.utc
PLUS7 = dt.timezone(dt.timedelta(hours=7))


def one(dtype: T.DataType, value: Any, *, nullable: bool = True, metadata: dict | None = None,
        zone: dt.tzinfo = UTC) -> Any:
    """The converted value, or the problem's message."""
    schema = T.StructType([T.StructField("c", dtype, nullable, metadata or {})])
    out = RowConverter(schema, ConvertOptions(zone)).convert({"c": value})
    if isinstance(out, ConvertedRow):
        return out.values[0]
    assert len(out) == 1 and out[0].column == "c", out
    return f"error: {out[0].message}"


GOOD = [
    # strings: text of primitives and big numbers
    (T.StringType(), "abc", "abc"),
    (T.StringType(), 42, "42"),
    (T.StringType(), True, "true"),
    (T.StringType(), Decimal("1.50"), "1.50"),
    (T.VarcharType(3), "abc", "abc"),
    (T.CharType(2), "ab", "ab"),
    # binary: bytes or hex
    (T.BinaryType(), b"\x01\xff", b"\x01\xff"),
    (T.BinaryType(), "01ff", b"\x01\xff"),
    # numbers from numbers and strings
    (T.IntegerType(), 7, 7),
    (T.IntegerType(), "42", 42),
    (T.IntegerType(), " -3 ", -3),
    (T.IntegerType(), 5.0, 5),
    (T.LongType(), "4.2e1", 42),
    (T.ByteType(), 127, 127),
    (T.ShortType(), Decimal("12"), 12),
    (T.DecimalType(10, 2), "12.345", Decimal("12.35")),  # half-up to the scale
    (T.DecimalType(10, 2), 1.1, Decimal("1.10")),
    (T.DecimalType(10, 2), 3, Decimal("3.00")),
    (T.DoubleType(), "2.5", 2.5),
    (T.DoubleType(), 3, 3.0),
    (T.DoubleType(), Decimal("0.5"), 0.5),
    (T.FloatType(), "1e3", 1000.0),
    # booleans from booleans, numbers and strings
    (T.BooleanType(), True, True),
    (T.BooleanType(), 0, False),
    (T.BooleanType(), 2.5, True),
    (T.BooleanType(), "YES", True),
    (T.BooleanType(), "off", False),
    (T.BooleanType(), "t", True),
    (T.BooleanType(), "0", False),
    # dates: every string format of the seed, objects, integer-stored
    (T.DateType(), "2013-04-28", dt.date(2013, 4, 28)),
    (T.DateType(), "2013-04-28T20:57:01.123456789+07:00", dt.date(2013, 4, 28)),
    (T.DateType(), "2013-04-28T20:57:01.123456", dt.date(2013, 4, 28)),
    (T.DateType(), "2013-04-28T20:57:01", dt.date(2013, 4, 28)),
    (T.DateType(), "2013-04-28T20:57", dt.date(2013, 4, 28)),
    (T.DateType(), "2013-04-28T20:57:01-07:00", dt.date(2013, 4, 28)),
    (T.DateType(), "2013-04-28T20:57-07:00", dt.date(2013, 4, 28)),
    (T.DateType(), dt.datetime(2013, 4, 28, 23, 0), dt.date(2013, 4, 28)),
    (T.DateType(), "1367107200", dt.date(2013, 4, 28)),  # seconds
    (T.DateType(), 1367107200000, dt.date(2013, 4, 28)),  # milliseconds
    # timestamps with local time zone: aware UTC out; no offset = session zone
    (T.TimestampType(), "2013-04-28T20:57:01.123456789+07:00", dt.datetime(2013, 4, 28, 13, 57, 1, 123456, UTC)),
    (T.TimestampType(), "2013-04-28T20:57:01", dt.datetime(2013, 4, 28, 20, 57, 1, tzinfo=UTC)),
    (T.TimestampType(), "2013-04-28T20:57", dt.datetime(2013, 4, 28, 20, 57, tzinfo=UTC)),
    (T.TimestampType(), "2013-04-28T20:57:01-07:00", dt.datetime(2013, 4, 29, 3, 57, 1, tzinfo=UTC)),
    (T.TimestampType(), "2013-04-28T20:57-07:00", dt.datetime(2013, 4, 29, 3, 57, tzinfo=UTC)),
    (T.TimestampType(), "2013-04-28", dt.datetime(2013, 4, 28, tzinfo=UTC)),
    (T.TimestampType(), "1367182621", dt.datetime(2013, 4, 28, 20, 57, 1, tzinfo=UTC)),
    (T.TimestampType(), 1367182621123456, dt.datetime(2013, 4, 28, 20, 57, 1, 123456, tzinfo=UTC)),  # micros
    (T.TimestampType(), 1367182621123456789, dt.datetime(2013, 4, 28, 20, 57, 1, 123456, tzinfo=UTC)),  # nanos
    (T.TimestampType(), dt.date(2013, 4, 28), dt.datetime(2013, 4, 28, tzinfo=UTC)),
    (T.TimestampType(), dt.datetime(2013, 4, 28, 20, 57, tzinfo=PLUS7), dt.datetime(2013, 4, 28, 13, 57, tzinfo=UTC)),
    # timestamps without time zone: the wall clock as written
    (T.TimestampNTZType(), "2013-04-28T20:57:01.5+07:00", dt.datetime(2013, 4, 28, 20, 57, 1, 500000)),
    (T.TimestampNTZType(), "2013-04-28T20:57", dt.datetime(2013, 4, 28, 20, 57)),
    (T.TimestampNTZType(), "2013-04-28", dt.datetime(2013, 4, 28)),
    (T.TimestampNTZType(), 1367182621, dt.datetime(2013, 4, 28, 20, 57, 1)),
    # structured types: Python values or JSON text, elements converted
    (T.ArrayType(T.IntegerType()), "[1, \"2\", null]", [1, 2, None]),
    (T.ArrayType(T.StringType()), ("a", "b"), ["a", "b"]),
    (T.MapType(T.StringType(), T.DoubleType()), '{"a": 1, "b": "2.5"}', {"a": 1.0, "b": 2.5}),
    (T.MapType(T.IntegerType(), T.StringType()), '{"1": "x"}', {1: "x"}),
    (T.StructType([T.StructField("x", T.IntegerType()), T.StructField("Y", T.DateType())]),
     '{"x": "3", "y": "2013-04-28"}', (3, dt.date(2013, 4, 28))),
    (T.StructType([T.StructField("x", T.IntegerType()), T.StructField("y", T.StringType())]),
     {"x": 1}, (1, None)),
]


@pytest.mark.parametrize("dtype, value, expected", GOOD, ids=[f"{d.simpleString()}<-{v!r}" for d, v, _ in GOOD])
def test_good_conversions(dtype: T.DataType, value: Any, expected: Any) -> None:
    got = one(dtype, value)
    assert got == expected and type(got) is type(expected), got


BAD = [
    (T.StringType(), {"a": 1}, "is not a string"),
    (T.VarcharType(3), "abcd", "4 characters long, more than varchar(3)"),
    (T.BinaryType(), "xyz", "is not hex-encoded binary"),
    (T.BinaryType(), 12, "is not binary"),
    (T.IntegerType(), "12x", "is not a number"),
    (T.IntegerType(), "1.5", "is not an integer"),
    (T.IntegerType(), 2 ** 31, "out of range for int"),
    (T.IntegerType(), True, "is a boolean, not a number"),
    (T.ByteType(), 128, "out of range for tinyint"),
    (T.LongType(), float("nan"), "not a finite number"),
    (T.DecimalType(4, 2), "123.4", "out of range for decimal(4,2)"),
    (T.DecimalType(10, 2), "abc", "is not a number"),
    (T.DoubleType(), "two", "is not a number"),
    (T.DoubleType(), [1], "is not a number"),
    (T.FloatType(), 1e39, "out of range for float"),
    (T.BooleanType(), "maybe", "is not a boolean"),
    (T.BooleanType(), [True], "is not a boolean"),
    (T.DateType(), "28/04/2013", "supported format"),
    (T.DateType(), "2013-02-30", "not a valid date"),
    (T.TimestampType(), "2013-04-28 25:00", "not a valid date or timestamp"),
    (T.TimestampType(), "2013-04-28T20:57:01+25:00", "not a valid time zone offset"),
    (T.TimestampNTZType(), 1.5, "is not a date or timestamp"),
    (T.ArrayType(T.IntegerType()), "[1, 2", "is not valid JSON"),
    (T.ArrayType(T.IntegerType()), '{"a": 1}', "is not an array"),
    (T.ArrayType(T.IntegerType()), ["1", "b"], "element 1: 'b' is not a number"),
    (T.ArrayType(T.IntegerType(), containsNull=False), [1, None], "element 1 is NULL"),
    (T.MapType(T.StringType(), T.IntegerType()), "[1]", "is not a map"),
    (T.MapType(T.IntegerType(), T.IntegerType()), {"k": 1}, "key 'k': 'k' is not a number"),
    (T.StructType([T.StructField("x", T.IntegerType())]), '{"z": 1}', "no field 'z'"),
    (T.StructType([T.StructField("x", T.IntegerType(), False)]), "{}", "field x is NULL"),
    (T.StructType([T.StructField("x", T.IntegerType())]), "not json", "is not valid JSON"),
]


@pytest.mark.parametrize("dtype, value, message", BAD, ids=[f"{d.simpleString()}<-{v!r}" for d, v, _ in BAD])
def test_bad_value_of_each_type(dtype: T.DataType, value: Any, message: str) -> None:
    got = one(dtype, value)
    assert isinstance(got, str) and got.startswith("error:") and message in got, got


def test_char_varchar_lengths_from_delta_metadata() -> None:
    # Delta stores CHAR(n)/VARCHAR(n) as strings with the declared type in the field's metadata.
    meta = {"__CHAR_VARCHAR_TYPE_STRING": "varchar(2)"}
    assert one(T.StringType(), "ab", metadata=meta) == "ab"
    assert "more than varchar(2)" in one(T.StringType(), "abc", metadata=meta)


def test_timestamp_without_offset_is_read_in_the_session_zone() -> None:
    assert one(T.TimestampType(), "2013-04-28T20:57", zone=PLUS7) == dt.datetime(2013, 4, 28, 13, 57, tzinfo=UTC)


def test_row_problems_name_columns_and_collect_all() -> None:
    schema = T.StructType([T.StructField("id", T.IntegerType(), False), T.StructField("v", T.DoubleType())])
    conv = RowConverter(schema)
    assert conv.convert({"ID": "1", "v": None}) == ConvertedRow((1, None), 8)  # names match case-insensitively
    assert conv.convert({"v": "x", "extra": 1}) == [
        ColumnProblem("extra", "no such column in the table"),
        ColumnProblem("id", "NULL (or missing) in a NOT NULL column"),
        ColumnProblem("v", "'x' is not a number")]
    assert conv.convert([1, 2]) == [
        ColumnProblem(None, "a row must be a mapping of column names to values, not list")]
