"""Facts about Spark SQL types that decide how dtables may compare values."""

from __future__ import annotations

from pyspark.sql import types as T


def has_map(t: T.DataType) -> bool:
    """Whether values of type ``t`` hold a map anywhere. Spark cannot compare maps (``=``, ``<=>``, ordering,
    grouping): a value holding one is taken as changed wherever dtables would compare it."""
    if isinstance(t, T.MapType):
        return True
    if isinstance(t, T.ArrayType):
        return has_map(t.elementType)
    if isinstance(t, T.StructType):
        return any(has_map(f.dataType) for f in t.fields)
    return False
