"""Validating and converting inserted rows against a Delta table's schema, as Snowpipe Streaming does (seed 004).

What each column type accepts (the seed's table, in Spark's types):

| column type | accepted values |
| --- | --- |
| STRING, CHAR(n), VARCHAR(n) | str; int, float, Decimal, bool (their text; booleans as ``true``/``false``) |
| BINARY | bytes, bytearray; a hex-encoded str |
| TINYINT ... BIGINT | int, integral float or Decimal, numeric str (``"42"``, ``"4.2e1"``) |
| DECIMAL(p, s) | int, float, Decimal, numeric str; rounded half-up to scale ``s`` |
| FLOAT, DOUBLE | int, float, Decimal, numeric str (``"NaN"``, ``"inf"`` too) |
| BOOLEAN | bool; numbers (0 false, else true); str ``true/t/yes/y/on/1``, ``false/f/no/n/off/0`` |
| DATE | date, datetime; str ``YYYY-MM-DD[THH24:MI[:SS[.FF]][TZH:TZM]]``; integer-stored (epoch, str or int) |
| TIMESTAMP, TIMESTAMP_NTZ | date, datetime; the same str formats; integer-stored epoch |
| ARRAY, MAP, STRUCT | list / dict (elements converted recursively), or a str holding that value as JSON |

Integer-stored dates and timestamps follow Snowflake's rule: seconds since the epoch when the absolute value is
below 31536000000, milliseconds below 31536000000000, microseconds below 31536000000000000, nanoseconds above.
A TIMESTAMP (with local time zone) given without an offset is read in the session time zone; a TIMESTAMP_NTZ keeps
the wall-clock time as written and ignores an offset.

Errors are per value and per row: a row's conversion returns either its values (a tuple in the table's column
order) or every problem found in it, each naming the column.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import singledispatch
from typing import Any

from pyspark.sql import types as T

from dtables.ingest.errors import IngestError

Converter = Callable[[Any], Any]


class BadValue(IngestError):
    """A value that does not convert to its column's type; the message says why, without the column's name."""


@dataclass(frozen=True)
class ColumnProblem:
    """One problem of one row: the column (None for the row as a whole) and what is wrong."""

    column: str | None
    message: str


@dataclass(frozen=True)
class ConvertOptions:
    """What conversions depend on besides the type: the time zone a TIMESTAMP without offset is read in."""

    time_zone: dt.tzinfo = dt.timezone.utc


# -- scalar helpers ---------------------------------------------------------------------------------------------------


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool)


def _decimal(value: Any) -> decimal.Decimal:
    """A finite Decimal from a number or a numeric string."""
    if isinstance(value, bool):
        raise BadValue(f"{value} is a boolean, not a number")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BadValue(f"{value} is not a finite number")
        return decimal.Decimal(repr(value))
    if isinstance(value, int):
        return decimal.Decimal(value)
    if isinstance(value, decimal.Decimal):
        number = value
    elif isinstance(value, str):
        try:
            number = decimal.Decimal(value.strip())
        except decimal.InvalidOperation as e:
            raise BadValue(f"{_show(value)} is not a number") from e
    else:
        raise BadValue(f"{_show(value)} ({type(value).__name__}) is not a number")
    if not number.is_finite():
        raise BadValue(f"{_show(value)} is not a finite number")
    return number


_INT_RANGES = {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32, T.LongType: 64}


def _integer(bits: int, name: str) -> Converter:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def convert(value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            exact = _decimal(value)
            if exact != exact.to_integral_value():
                raise BadValue(f"{_show(value)} is not an integer")
            number = int(exact)
        if not low <= number <= high:
            raise BadValue(f"{_show(value)} is out of range for {name}")
        return number

    return convert


def _float(single: bool) -> Converter:
    def convert(value: Any) -> float:
        if isinstance(value, bool) or not (_is_number(value) or isinstance(value, str)):
            raise BadValue(f"{_show(value)} ({type(value).__name__}) is not a number")
        try:
            number = float(value.strip() if isinstance(value, str) else value)
        except (ValueError, OverflowError) as e:
            raise BadValue(f"{_show(value)} is not a number") from e
        if single and math.isfinite(number) and abs(number) > 3.4028234663852886e38:
            raise BadValue(f"{_show(value)} is out of range for float")
        return number

    return convert


_TRUE = {"true", "t", "yes", "y", "on", "1"}
_FALSE = {"false", "f", "no", "n", "off", "0"}


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if _is_number(value):
        if isinstance(value, float) and math.isnan(value):
            raise BadValue("NaN is not a boolean")
        return value != 0
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise BadValue(f"{_show(value)} is not a boolean (true/t/yes/y/on/1 or false/f/no/n/off/0)")
    raise BadValue(f"{_show(value)} ({type(value).__name__}) is not a boolean")


def _string(limit: int | None, kind: str) -> Converter:
    def convert(value: Any) -> str:
        if isinstance(value, str):
            text = value
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif _is_number(value):
            text = str(value)
        else:
            raise BadValue(f"{_show(value)} ({type(value).__name__}) is not a string")
        if limit is not None and len(text) > limit:
            raise BadValue(f"{_show(value)} is {len(text)} characters long, more than {kind} allows")
        return text

    return convert


def _binary(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        try:
            return bytes.fromhex(value)
        except ValueError as e:
            raise BadValue(f"{_show(value)} is not hex-encoded binary") from e
    raise BadValue(f"{_show(value)} ({type(value).__name__}) is not binary (bytes or a hex string)")


# -- dates and timestamps ---------------------------------------------------------------------------------------------

# The string formats of seed 004: a date, optionally with THH24:MI[:SS[.FF]] and an offset TZH:TZM.
_DATETIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})?)?$")
_INTEGER = re.compile(r"^[+-]?\d+$")


def _epoch(number: int) -> dt.datetime:
    """An integer-stored timestamp (Snowflake's scale rule) as an aware UTC datetime."""
    magnitude = abs(number)
    if magnitude < 31536000000:
        micros = number * 1_000_000
    elif magnitude < 31536000000000:
        micros = number * 1_000
    elif magnitude < 31536000000000000:
        micros = number
    else:
        micros = number // 1_000
    try:
        return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=micros)
    except OverflowError as e:
        raise BadValue(f"{number} is out of range as an integer-stored timestamp") from e


def _offset(text: str) -> dt.tzinfo:
    if text == "Z":
        return dt.timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:])
    if hours > 18 or minutes > 59:
        raise BadValue(f"{text} is not a valid time zone offset")
    return dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes))


def _parse_datetime(value: Any) -> dt.datetime | dt.date:
    """A date (date-only text), a naive datetime (no offset) or an aware one (offset or integer-stored)."""
    if isinstance(value, (dt.datetime, dt.date)):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return _epoch(value)
    if not isinstance(value, str):
        raise BadValue(f"{_show(value)} ({type(value).__name__}) is not a date or timestamp")
    text = value.strip()
    if _INTEGER.match(text):
        return _epoch(int(text))
    match = _DATETIME.match(text)
    if match is None:
        raise BadValue(f"{_show(value)} is not a date or timestamp in a supported format "
                       "(YYYY-MM-DD[THH24:MI[:SS[.FF]][TZH:TZM]] or an integer)")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    try:
        if hour is None:
            return dt.date(int(year), int(month), int(day))
        micros = int((fraction or "0").ljust(9, "0")[:6])
        return dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0), micros,
                           tzinfo=_offset(offset) if offset else None)
    except ValueError as e:
        raise BadValue(f"{_show(value)} is not a valid date or timestamp: {e}") from e


def _date(value: Any) -> dt.date:
    parsed = _parse_datetime(value)
    return parsed.date() if isinstance(parsed, dt.datetime) else parsed


def _timestamp_ltz(zone: dt.tzinfo) -> Converter:
    def convert(value: Any) -> dt.datetime:
        parsed = _parse_datetime(value)
        if not isinstance(parsed, dt.datetime):
            parsed = dt.datetime(parsed.year, parsed.month, parsed.day)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=zone)
        return parsed.astimezone(dt.timezone.utc)  # aware: PySpark converts it without the local time zone

    return convert


def _timestamp_ntz(value: Any) -> dt.datetime:
    parsed = _parse_datetime(value)
    if not isinstance(parsed, dt.datetime):
        return dt.datetime(parsed.year, parsed.month, parsed.day)
    if isinstance(value, int) or (isinstance(value, str) and _INTEGER.match(value.strip())):
        return parsed.astimezone(dt.timezone.utc).replace(tzinfo=None)  # epoch: UTC wall clock
    return parsed.replace(tzinfo=None)  # wall clock as written


# -- structured types -------------------------------------------------------------------------------------------------


def _json(value: Any, expected: type, what: str) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise BadValue(f"{_show(value)} is not valid JSON ({e.msg} at character {e.pos})") from e
        except ValueError as e:  # e.g. an integer too long to convert
            raise BadValue(f"{_show(value)} is not valid JSON ({e})") from e
    if not isinstance(value, expected):
        raise BadValue(f"{_show(value)} is not {what}")
    return value


def _nested(convert: Converter, nullable: bool, where: str) -> Converter:
    def element(value: Any) -> Any:
        if value is None:
            if not nullable:
                raise BadValue(f"{where} is NULL, which the type does not allow")
            return None
        try:
            return convert(value)
        except BadValue as e:
            raise BadValue(f"{where}: {e}") from e

    return element


@singledispatch
def converter(dtype: T.DataType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    """The conversion of one value to ``dtype``; raises UnsupportedType for types ingestion cannot fill."""
    raise UnsupportedType(f"columns of type {dtype.simpleString()} cannot be ingested")


class UnsupportedType(IngestError):
    """A column type ingestion cannot fill."""


@converter.register(T.StringType)
def _(dtype: T.StringType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    declared = (metadata or {}).get("__CHAR_VARCHAR_TYPE_STRING")  # CHAR(n)/VARCHAR(n) are strings in Delta
    match = re.match(r"^(?:var)?char\((\d+)\)$", declared or "", re.IGNORECASE)
    return _string(int(match.group(1)), str(declared)) if match else _string(None, "string")


@converter.register(T.VarcharType)
@converter.register(T.CharType)
def _(dtype: Any, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    return _string(dtype.length, dtype.simpleString())


@converter.register(T.BinaryType)
def _(dtype: T.BinaryType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    return _binary


@converter.register(T.ByteType)
@converter.register(T.ShortType)
@converter.register(T.IntegerType)
@converter.register(T.LongType)
def _(dtype: Any, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    return _integer(_INT_RANGES[type(dtype)], dtype.simpleString())


@converter.register(T.DecimalType)
def _(dtype: T.DecimalType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    quantum = decimal.Decimal(1).scaleb(-dtype.scale)
    limit = decimal.Decimal(10) ** (dtype.precision - dtype.scale)

    def convert(value: Any) -> decimal.Decimal:
        number = _decimal(value).quantize(quantum, rounding=decimal.ROUND_HALF_UP,
                                          context=decimal.Context(prec=80))
        if abs(number) >= limit:
            raise BadValue(f"{_show(value)} is out of range for {dtype.simpleString()}")
        return number

    return convert


@converter.register(T.FloatType)
def _(dtype: T.FloatType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    return _float(single=True)


@converter.register(T.DoubleType)
def _(dtype: T.DoubleType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    return _float(single=False)


@converter.register(T.BooleanType)
def _(dtype: T.BooleanType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    return _boolean


@converter.register(T.DateType)
def _(dtype: T.DateType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    return _date


@converter.register(T.TimestampType)
def _(dtype: T.TimestampType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    return _timestamp_ltz(options.time_zone)


@converter.register(T.TimestampNTZType)
def _(dtype: T.TimestampNTZType, options: ConvertOptions,
      metadata: Mapping[str, Any] | None = None) -> Converter:
    return _timestamp_ntz


@converter.register(T.ArrayType)
def _(dtype: T.ArrayType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    inner = converter(dtype.elementType, options)

    def convert(value: Any) -> list[Any]:
        items = _json(list(value) if isinstance(value, tuple) else value, list, "an array (a list or a JSON array)")
        return [_nested(inner, dtype.containsNull, f"element {i}")(v) for i, v in enumerate(items)]

    return convert


@converter.register(T.MapType)
def _(dtype: T.MapType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    key, value_ = converter(dtype.keyType, options), converter(dtype.valueType, options)

    def convert(value: Any) -> dict[Any, Any]:
        items = _json(value, dict, "a map (a dict or a JSON object)")
        return {_nested(key, False, f"key {k!r}")(k): _nested(value_, dtype.valueContainsNull, f"key {k!r}")(v)
                for k, v in items.items()}

    return convert


@converter.register(T.StructType)
def _(dtype: T.StructType, options: ConvertOptions, metadata: Mapping[str, Any] | None = None) -> Converter:
    fields = [(f.name, _nested(converter(f.dataType, options, f.metadata), f.nullable, f"field {f.name}"))
              for f in dtype.fields]
    by_name = {f.name.lower(): f.name for f in dtype.fields}

    def convert(value: Any) -> tuple[Any, ...]:
        given = _json(value, dict, "an object (a dict or a JSON object)")
        unknown = [k for k in given if str(k).lower() not in by_name]
        if unknown:
            raise BadValue(f"no field {unknown[0]!r} in {dtype.simpleString()}")
        lowered = {str(k).lower(): v for k, v in given.items()}
        return tuple(convert_field(lowered.get(name.lower())) for name, convert_field in fields)

    return convert


# -- rows -------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvertedRow:
    """A row ready to write (values in the table's column order) and a rough size in bytes, for buffering."""

    values: tuple[Any, ...]
    size: int


class RowConverter:
    """Converts rows (mappings of column name to value; names match case-insensitively) to a table's schema."""

    def __init__(self, schema: T.StructType, options: ConvertOptions = ConvertOptions()):
        self.schema = schema
        self._columns = [(f.name, f.nullable, converter(f.dataType, options, f.metadata)) for f in schema.fields]
        self._index = {f.name.lower(): i for i, f in enumerate(schema.fields)}

    def convert(self, row: Any) -> ConvertedRow | list[ColumnProblem]:
        """The converted row, or every problem found in it."""
        if not isinstance(row, Mapping):
            return [ColumnProblem(None, f"a row must be a mapping of column names to values, not "
                                        f"{type(row).__name__}")]
        problems = []
        given: list[Any] = [None] * len(self._columns)
        for key, value in row.items():
            index = self._index.get(str(key).lower())
            if index is None:
                problems.append(ColumnProblem(str(key), "no such column in the table"))
            else:
                given[index] = value
        size = 0
        values: list[Any] = []
        for (name, nullable, convert), value in zip(self._columns, given):
            if value is None:
                if not nullable:
                    problems.append(ColumnProblem(name, "NULL (or missing) in a NOT NULL column"))
                values.append(None)
                continue
            try:
                converted = convert(value)
            except BadValue as e:
                problems.append(ColumnProblem(name, str(e)))
                continue
            values.append(converted)
            size += len(converted) if isinstance(converted, (str, bytes)) else 8
        return problems if problems else ConvertedRow(tuple(values), size)

