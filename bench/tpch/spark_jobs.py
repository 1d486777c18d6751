"""Count the Spark jobs a piece of work launches (a job group plus the status tracker)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
_groups = itertools.count()


@contextmanager
def _job_group(spark: Any, label: str) -> Iterator[str]:
    sc = spark.sparkContext
    group = f"bench-tpch-{next(_groups)}-{label}"
    sc.setJobGroup(group, label)
    try:
        yield group
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)


def measure(spark: Any, label: str, work: Callable[[], T]) -> tuple[T, float, int]:
    """Run `work`; return its result, the wall-clock seconds and the number of Spark jobs it launched.

    Jobs are those tagged with a fresh job group, which Spark sets on every job started from this thread.
    """
    with _job_group(spark, label) as group:
        start = time.perf_counter()
        result = work()
        seconds = time.perf_counter() - start
    return result, seconds, len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
