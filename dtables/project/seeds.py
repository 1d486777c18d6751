"""A source table's first rows from a seed file in the project (``seeds/<table>.csv`` or ``.json``).

The file is read here, in the process that holds the project, and its rows travel to Spark with the request: on a
cluster or over Spark Connect the executors and the server cannot see the project folder. The result matches
Spark's own readers with the table's schema: CSV columns by position after a header line, empty fields NULL, values
cast to the column types (a value that does not cast is an error, not a silent NULL); JSON one object per line.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T


def seed_frame(spark: Any, schema: T.StructType, path: Path) -> Any:
    """The rows of the seed file at ``path`` as a DataFrame with ``schema``."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        return _csv_frame(spark, schema, text)
    lines = [(line,) for line in text.splitlines() if line.strip()]
    values = spark.createDataFrame(lines, T.StructType([T.StructField("value", T.StringType())]))
    return values.select(F.from_json("value", schema).alias("row")).select("row.*")


def _csv_frame(spark: Any, schema: T.StructType, text: str) -> Any:
    width = len(schema.fields)
    rows = [[field if field != "" else None for field in row[:width]] + [None] * (width - len(row))
            for row in list(csv.reader(io.StringIO(text)))[1:] if row]
    strings = T.StructType([T.StructField(f"_c{i}", T.StringType()) for i in range(width)])
    frame = spark.createDataFrame(rows, strings)
    return frame.select(*[F.col(f"_c{i}").cast(f.dataType).alias(f.name) for i, f in enumerate(schema.fields)])
