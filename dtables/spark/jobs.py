"""Where a piece of driver work spent its time: Spark jobs launched, seconds inside them, bytes they read.

`SparkWork` tags every job started from the calling thread with a fresh job group (restoring the caller's group
afterwards) and, at the end, reads the jobs' times and their stages' input from Spark's status store (the data
behind the Spark UI, kept even when the UI is off). Seconds inside jobs are the union of the jobs' intervals, so
concurrent jobs are not counted twice; the rest of the wall time was spent on the driver (planning, Delta's log
and commit, Python). Spark Connect sessions have no SparkContext here: the counts are then None.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

_groups = itertools.count()
_open = threading.local()  # per thread: the [bytes, records] counters of the SparkWork blocks open on it
_GROUP, _DESCRIPTION, _INTERRUPT = "spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"


@dataclass(frozen=True)
class WorkCost:
    """What one piece of work cost: wall seconds, and (None when unknown) Spark jobs, seconds inside them,
    seconds on the driver outside any job, and the bytes and records its stages read."""

    seconds: float
    jobs: int | None = None
    job_seconds: float | None = None
    driver_seconds: float | None = None
    bytes_read: int | None = None
    records_read: int | None = None


def _union_seconds(intervals: list[tuple[int, int]]) -> float:
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total / 1000


def driver_read(read_bytes: int, records: int) -> None:
    """Counts input the driver read itself, outside any Spark job (``changes.picked_rows``), into every
    ``SparkWork`` open on this thread: a refresh's bytes read are its files' bytes however it read them."""
    for counter in getattr(_open, "counters", ()):
        counter[0] += read_bytes
        counter[1] += records


class SparkWork:
    """``with SparkWork(spark, "refresh x") as work: ...``; then ``work.cost``."""

    def __init__(self, spark: Any, label: str) -> None:
        try:
            self.sc = spark.sparkContext
        except Exception:  # Spark Connect: no SparkContext in this process
            self.sc = None
        self.label = label
        self.group = f"dtables-{next(_groups)}-{label}"[:200]
        self.cost = WorkCost(0.0)

    def __enter__(self) -> SparkWork:
        self._driver_read = [0, 0]
        if not hasattr(_open, "counters"):
            _open.counters = []
        _open.counters.append(self._driver_read)
        self._saved = None
        if self.sc is not None:
            self._saved = tuple(self.sc.getLocalProperty(k) for k in (_GROUP, _DESCRIPTION, _INTERRUPT))
            self.sc.setJobGroup(self.group, self.label)
        self._start = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        seconds = time.perf_counter() - self._start
        _open.counters.remove(self._driver_read)
        if self.sc is None or self._saved is None:
            self.cost = WorkCost(seconds)
            return
        for key, value in zip((_GROUP, _DESCRIPTION, _INTERRUPT), self._saved):
            self.sc.setLocalProperty(key, value)
        try:
            cost = self._measure(seconds)
            read_bytes, records = self._driver_read
            self.cost = dataclasses.replace(cost, bytes_read=(cost.bytes_read or 0) + read_bytes,
                                            records_read=(cost.records_read or 0) + records)
        except Exception:  # the status store is Spark-internal: never fail the work for its accounting
            self.cost = WorkCost(seconds, jobs=len(self.sc.statusTracker().getJobIdsForGroup(self.group)))

    def _measure(self, seconds: float) -> WorkCost:
        job_ids = list(self.sc.statusTracker().getJobIdsForGroup(self.group))
        if not job_ids:
            return WorkCost(seconds, 0, 0.0, seconds, 0, 0)
        jsc = self.sc._jsc.sc()
        jsc.listenerBus().waitUntilEmpty()  # job-end events reach the status store asynchronously
        store = jsc.statusStore()
        intervals, read_bytes, read_records = [], 0, 0
        for job_id in job_ids:
            job = store.job(job_id)
            submitted, completed = job.submissionTime(), job.completionTime()
            if submitted.isDefined() and completed.isDefined():
                intervals.append((submitted.get().getTime(), completed.get().getTime()))
            stages = job.stageIds()
            for i in range(stages.size()):
                try:
                    stage = store.lastStageAttempt(stages.apply(i))
                except Exception:  # skipped (its shuffle output was reused): it read nothing
                    continue
                read_bytes += stage.inputBytes()
                read_records += stage.inputRecords()
        inside = min(_union_seconds(intervals), seconds)
        return WorkCost(seconds, len(job_ids), inside, seconds - inside, read_bytes, read_records)
