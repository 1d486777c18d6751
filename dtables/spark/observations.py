"""Metrics a Spark job computes beside its rows (``DataFrame.observe``), read without waiting forever.

An observation's metrics reach the driver with the end of the job that computed them, through Spark's listener
bus: usually at once, but PySpark's ``Observation.get`` blocks until they arrive, and a job that failed, or one
whose plan Spark rewrote so the metrics node never ran, would block its caller for good.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from pyspark.sql import Observation
from pyspark.sql import functions as F


def observed(observation: Any, timeout_s: float = 30.0) -> dict[str, Any] | None:
    """The observation's metrics, or None if they do not arrive in time."""
    found: dict[str, Any] = {}
    waiter = threading.Thread(target=lambda: found.update(observation.get or {}), daemon=True)
    waiter.start()
    waiter.join(timeout_s)
    return found or None


def counting(df: Any, prefix: str) -> tuple[Any, Observation]:
    """``df`` counting its rows (metric ``rows``) in whatever job computes it, and the observation to read."""
    observation = Observation(f"{prefix}_{uuid.uuid4().hex}")
    return df.observe(observation, F.count(F.lit(1)).alias("rows")), observation
