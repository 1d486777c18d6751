"""Key pruning's I/O: read the keys of change reads (`probe_keys`, one Spark job for every probe of a refresh, none
where the driver holds the change rows) and skip the data files whose statistics rule them out (`file_filter`).

The plan side is `differentiation/prune.py`. Keys of integral, decimal and date columns become at most
`MAX_RANGES` inclusive ranges, merged across the widest gaps so that appended keys (one range above the old maximum)
and clustered keys skip whole files; other types become an IN list up to `MAX_VALUES` values, else their min..max.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from sqlglot import exp

from differentiation import KeyFilter, KeyProbe, PruneSite
from differentiation.sql import alias, call, col, ident
from differentiation.vocabulary import ACTION, DELETE, INSERT
from dtables.changes.log import FileAction
from dtables.sql.dialect import to_spark

MAX_RANGES = 32  # OR-ed ranges Parquet's filters and the file statistics check per key
MAX_VALUES = 1000  # IN-list values for keys without an order we can measure gaps in
MAX_COLLECTED = 100_000  # distinct keys brought to the driver; beyond, only min..max
KEY_PRUNING = "spark.dtables.refresh.keyPruning"  # false: never probe (to compare)
MIN_BYTES = "spark.dtables.refresh.keyPruningMinBytes"
DEFAULT_MIN_BYTES = 32 * 1024 * 1024  # below, a scan costs less than the job that reads the keys
MAX_KEPT_FRACTION = 0.5  # keys that leave more of a snapshot's bytes to read are not used to filter it
MAX_FRACTION = "spark.dtables.refresh.keyPruningMaxFraction"  # 1: filter whatever the keys leave (tests)

_INTEGRAL = re.compile(r"^(tinyint|smallint|int|integer|bigint|byte|short|long)$", re.I)
_DECIMAL = re.compile(r"^decimal(\(\s*\d+\s*(,\s*\d+\s*)?\))?$", re.I)


def _order(type_: str) -> Callable[[Any], Any] | None:
    """A Python value of the key's text (or statistics value) in the column's order, for types with a gap."""
    t = type_.strip()
    if _INTEGRAL.match(t):
        return lambda v: int(v)
    if _DECIMAL.match(t):
        return lambda v: Decimal(str(v))
    if t.lower() == "date":
        return lambda v: datetime.date.fromisoformat(str(v)[:10])
    return None


def _gap(a: Any, b: Any) -> Any:
    return (b - a).days if isinstance(a, datetime.date) else b - a


def merged_ranges(values: Sequence[str], order: Callable[[str], Any], limit: int) -> tuple[tuple[str, str], ...]:
    """Sorted distinct values -> at most `limit` inclusive ranges, split at the widest gaps."""
    if len(values) <= limit:
        return tuple((v, v) for v in values)
    typed = [order(v) for v in values]
    gaps = sorted(range(1, len(values)), key=lambda i: _gap(typed[i - 1], typed[i]), reverse=True)[:limit - 1]
    bounds = [0, *sorted(gaps), len(values)]
    return tuple((values[a], values[b - 1]) for a, b in zip(bounds, bounds[1:]))


def key_filter(probe: KeyProbe, count: int, low: str | None, high: str | None,
               values: Sequence[str] | None, nulls: bool = False) -> KeyFilter:
    """The filter of a probe's result: `count` distinct non-NULL keys, their min and max, their sorted texts when
    they were collected, and whether NULL was a key too."""
    if count == 0 or low is None or high is None:
        return KeyFilter("", probe.type, values=(), nulls=nulls)
    order = _order(probe.type)
    if values is None:
        return KeyFilter("", probe.type, ranges=((low, high),), nulls=nulls)
    if order is not None:
        return KeyFilter("", probe.type, ranges=merged_ranges(values, order, MAX_RANGES), nulls=nulls)
    if len(values) <= MAX_VALUES:
        return KeyFilter("", probe.type, values=tuple(values), nulls=nulls)
    return KeyFilter("", probe.type, ranges=((low, high),), nulls=nulls)


def _keys_of(tables: Sequence[tuple[str, str]], missing: str, changes: Callable[[str], str]) -> exp.Query:
    """The keys of the tables' changes with no row of action `missing`: with INSERT missing, keys each lost over
    the interval (deleted and not inserted again: not in the table at its end); with DELETE, keys each gained.
    With the key unique at both ends, no other key is gone from (or new in) the table at that end."""
    parts = [exp.select(alias(col(key), "k")).from_(exp.maybe_parse(changes(table), into=exp.Table, dialect="spark"))
             .group_by(col(key)).having(exp.EQ(this=call("count_if", exp.EQ(this=col(ACTION),
                                                                              expression=exp.Literal.string(missing))),
                                               expression=exp.Literal.number(0)))
             for table, key in tables]
    out: exp.Query = parts[0]
    for p in parts[1:]:
        out = exp.Union(this=out, expression=p, distinct=False)
    return out


def _absent_keys(probe: KeyProbe, changes: Callable[[str], str]) -> exp.Query:
    """The keys the referenced tables of `probe.absent` lost over the interval or, for a probe at the start,
    gained: with the foreign key holding, no row of the pruned side carries one at that end."""
    return _keys_of(probe.absent, INSERT if probe.at == "end" else DELETE, changes)


def settled_keys(settled_by: Sequence[tuple[str, str]], when: str, changes: Callable[[str], str]) -> exp.Query:
    """The keys the referenced tables `settled_by` names gained over the interval or, for a snapshot at the start,
    lost (`KeyProbe.settled`), as one column `k`: the pruned side's rows with one at that end are all in its own
    change."""
    return _keys_of(settled_by, DELETE if when == "end" else INSERT, changes)


def _key_columns(key: exp.Expr, suffix: str) -> list[exp.Expr]:
    """n, lo, hi and ks (the sorted distinct keys as texts, at most MAX_COLLECTED + 1) of the non-NULL `key`s."""
    as_text = exp.Lambda(this=exp.Cast(this=col("x"), to=exp.DataType.build("STRING")), expressions=[ident("x")])
    collected = call("transform", call("slice", call("array_sort", call("collect_set", key.copy())),
                                       exp.Literal.number(1), exp.Literal.number(MAX_COLLECTED + 1)), as_text)
    return [alias(exp.Count(this=exp.Distinct(expressions=[key.copy()])), f"n{suffix}"),
            alias(exp.Cast(this=exp.Min(this=key.copy()), to=exp.DataType.build("STRING")), f"lo{suffix}"),
            alias(exp.Cast(this=exp.Max(this=key.copy()), to=exp.DataType.build("STRING")), f"hi{suffix}"),
            alias(collected, f"ks{suffix}")]


def probe_query(probes: Sequence[KeyProbe], changes: Callable[[str], str]) -> exp.Select:
    """One query with a row per probe: (probe, n, lo, hi, ks, nulls) of the keys to read from the snapshot and
    (n_chg, lo_chg, hi_chg, ks_chg) of those settled by the change (`KeyProbe.settled`), over the change reads
    `changes(table)` names."""
    rows = []
    for i, probe in enumerate(probes):
        reads = [exp.select(alias(col(column), "k")).from_(exp.maybe_parse(changes(table), into=exp.Table,
                                                                           dialect="spark"))
                 for table, column in probe.reads]
        union: exp.Query = reads[0]
        for r in reads[1:]:
            union = exp.Union(this=union, expression=r, distinct=False)
        if probe.absent:
            union = exp.select(col("k")).from_(union.subquery("c")).join(
                _absent_keys(probe, changes).subquery("a"), on=exp.EQ(this=exp.column("k", "c"),
                                                                       expression=exp.column("k", "a")),
                join_type="left anti")
        settled: exp.Expr = exp.false()
        if probe.settled:
            found = exp.select(col("k")).from_(settled_keys(probe.settled, probe.at, changes).subquery("s0")).distinct()
            union = exp.select(col("k", "c"), alias(exp.Not(this=exp.Is(this=col("k", "s"), expression=exp.Null())),
                                                    "settled")).from_(union.subquery("c")).join(
                found.subquery("s"), on=exp.EQ(this=exp.column("k", "c"), expression=exp.column("k", "s")),
                join_type="left")
            settled = col("settled")
        own = exp.If(this=settled.copy(), true=exp.Null(), false=col("k"))
        other = exp.If(this=settled.copy(), true=col("k"), false=exp.Null())
        rows.append(exp.select(
            alias(exp.Literal.number(i), "probe"), *_key_columns(own, ""),
            alias(call("bool_or", exp.Is(this=col("k"), expression=exp.Null())), "nulls"),
            *_key_columns(other, "_chg")).from_(union.subquery("c")))
    out: exp.Query = rows[0]
    for r in rows[1:]:
        out = exp.Union(this=out, expression=r, distinct=False)
    return out  # type: ignore[return-value]


# The change rows of a table the driver has without a job: (table, columns) -> rows of those columns and the action
# (a superset of the change read's rows, see `_probed_on_driver`), or None.
HeldKeys = Callable[[str, list[str]], "list[tuple[Any, ...]] | None"]


def probe_keys(spark: Any, sites: Iterable[PruneSite], changes: Callable[[str], str],
               table_bytes: Callable[[str, str], int | None], min_bytes: int,
               held: HeldKeys | None = None) -> dict[KeyProbe, KeyFilter]:
    """Read the keys of every probe whose pruned snapshot is at least `min_bytes` (`table_bytes(table, when)`;
    unknown sizes count as large), all in one Spark job; {} when no probe is worth it. Where `held` gives every
    change row the probes read, the keys are found on the driver instead (`_probed_on_driver`)."""
    probes: dict[KeyProbe, None] = {}
    for site in sites:
        size = table_bytes(site.table, site.when)
        if size is None or size >= min_bytes:
            probes.setdefault(site.probe, None)
    if not probes:
        return {}
    ordered = list(probes)
    rows = _probed_on_driver(ordered, held) if held is not None else None
    if rows is None:
        rows = spark.sql(to_spark(probe_query(ordered, changes))).collect()
    found = {}
    for row in rows:
        probe = ordered[row["probe"]]
        values = list(row["ks"]) if row["ks"] is not None and len(row["ks"]) <= MAX_COLLECTED else None
        found[probe] = key_filter(probe, row["n"], row["lo"], row["hi"], values, bool(row["nulls"]))
        if row["n_chg"]:  # the keys whose rows the change holds: the view of the snapshot finds them exactly
            settled = list(row["ks_chg"]) if len(row["ks_chg"]) <= MAX_COLLECTED else None
            found[probe] = dataclasses.replace(
                found[probe], settled_by=probe.settled,
                from_change=key_filter(probe, row["n_chg"], row["lo_chg"], row["hi_chg"], settled))
    return found


def _driver_text(type_: str) -> Callable[[Any], str] | None:
    """For key types whose values Python orders as Spark does, the text Spark's CAST(value AS STRING) gives."""
    t = type_.strip()
    if _INTEGRAL.match(t):
        return str
    if t.lower() == "date":
        return lambda v: v.isoformat()
    return None


def _probed_on_driver(probes: Sequence[KeyProbe], held: HeldKeys) -> list[dict[str, Any]] | None:
    """`probe_query`'s rows computed in Python from change rows the driver has without a Spark job (`held`), or
    None where it has not some table's (or the keys are of a type left to Spark). The probe's job runs for a few
    thousand rows as for a scan (0.25-0.6 s of a TPC-H refresh).

    The rows may be a superset of the change read's: the two halves of an update that agrees on the columns the
    plan compares are still there. Their key is then among the keys read (a superset of keys only reads more), and
    has both actions, so it is neither lost nor gained: fewer keys proved absent and fewer settled by the change,
    each of which only reads more rows from the snapshot."""
    found = [_driver_text(p.type) for p in probes]
    texts = [t for t in found if t is not None]
    if len(texts) < len(found):
        return None
    needed: dict[str, set[str]] = {}
    for probe in probes:
        for table, column in (*probe.reads, *probe.absent, *probe.settled):
            needed.setdefault(table, set()).add(column)
    values: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
    for table, columns in needed.items():
        names = sorted(columns)
        rows = held(table, names)
        if rows is None:
            return None
        for i, name in enumerate(names):
            values[(table, name)] = [(r[i], r[-1]) for r in rows]
    return [_probe_row(i, probe, values, text) for i, (probe, text) in enumerate(zip(probes, texts))]


def _keys_of_rows(tables: Sequence[tuple[str, str]], missing: str,
                  values: Mapping[tuple[str, str], list[tuple[Any, Any]]]) -> set[Any]:
    """`_keys_of` over held rows: the non-NULL keys with no row of action `missing` (a NULL key matches none)."""
    out: set[Any] = set()
    for table, key in tables:
        has: dict[Any, bool] = {}
        for k, action in values[(table, key)]:
            has[k] = has.get(k, False) or action == missing
        out |= {k for k, seen in has.items() if k is not None and not seen}
    return out


def _summary(keys: Iterable[Any], suffix: str, text: Callable[[Any], str]) -> dict[str, Any]:
    """`_key_columns` of non-NULL `keys`."""
    distinct = sorted(set(keys))
    return {f"n{suffix}": len(distinct), f"lo{suffix}": text(distinct[0]) if distinct else None,
            f"hi{suffix}": text(distinct[-1]) if distinct else None,
            f"ks{suffix}": [text(k) for k in distinct[:MAX_COLLECTED + 1]]}


def _probe_row(i: int, probe: KeyProbe, values: Mapping[tuple[str, str], list[tuple[Any, Any]]],
               text: Callable[[Any], str]) -> dict[str, Any]:
    """`probe_query`'s row of `probe` over held rows."""
    keys = [k for table, column in probe.reads for k, _ in values[(table, column)]]
    if probe.absent:
        absent = _keys_of_rows(probe.absent, INSERT if probe.at == "end" else DELETE, values)
        keys = [k for k in keys if k is None or k not in absent]
    settled = _keys_of_rows(probe.settled, DELETE if probe.at == "end" else INSERT, values) if probe.settled \
        else set()
    own = [k for k in keys if k is not None and k not in settled]
    other = [k for k in keys if k is not None and k in settled]
    nulls = any(k is None for k in keys) if keys else None  # bool_or of no rows: NULL
    return {"probe": i, **_summary(own, "", text), "nulls": nulls,
            **_summary(other, "_chg", text)}


def _spans(spans: list[tuple[Any, Any, str, str]], limit: int) -> tuple[tuple[str, str], ...]:
    """Inclusive (low, high) spans as at most `limit` ranges: overlapping ones merged, then the closest merged."""
    merged: list[list[Any]] = []
    for lo, hi, lo_text, hi_text in sorted(spans, key=lambda s: s[0]):
        if merged and lo <= merged[-1][1]:
            if hi > merged[-1][1]:
                merged[-1][1], merged[-1][3] = hi, hi_text
        else:
            merged.append([lo, hi, lo_text, hi_text])
    while len(merged) > limit:
        i = min(range(1, len(merged)), key=lambda j: _gap(merged[j - 1][1], merged[j][0]))
        merged[i - 1][1], merged[i - 1][3] = merged[i][1], merged[i][3]
        del merged[i]
    return tuple((m[2], m[3]) for m in merged)


def stats_filter(probe: KeyProbe, files: Mapping[str, Sequence[FileAction]]) -> KeyFilter | None:
    """The keys of a probe whose change reads are inserts only, bounded by the statistics of the files that hold
    them (`files`: per base table, the data files its interval appended), without reading them: a range per file,
    merged. None where that cannot be told: a type without an order, a file without statistics for the column.
    The caller checks that no key of the probe can be proved absent (`KeyProbe.absent`: that needs the keys)."""
    order = _order(probe.type)
    if order is None:
        return None
    spans: list[tuple[Any, Any, str, str]] = []
    nulls = False
    for table, column in probe.reads:
        for f in files[table]:
            if not f.stats:
                return None
            stats = json.loads(f.stats, parse_float=Decimal)
            low, high = (stats.get("minValues") or {}).get(column), (stats.get("maxValues") or {}).get(column)
            null_count = (stats.get("nullCount") or {}).get(column)
            if null_count is None:
                return None
            nulls = nulls or null_count > 0
            if low is None or high is None:
                if null_count < (f.num_records or 0):  # values the statistics do not bound
                    return None
                continue
            spans.append((order(low), order(high), str(low), str(high)))
    if not spans:
        return KeyFilter("", probe.type, values=(), nulls=nulls)
    return KeyFilter("", probe.type, ranges=_spans(spans, MAX_RANGES), nulls=nulls)


def file_filter(keys: Sequence[KeyFilter], types: Mapping[str, str]) -> Callable[[FileAction], bool]:
    """Whether a data file may hold a row passing every filter, by its statistics (min/max per column). Files
    without statistics for a column, and columns of types whose statistics we do not compare, are kept."""
    checks = []
    for k in keys:
        order = _order(types.get(k.column, ""))
        if order is None:
            continue
        spans = ([(order(v), order(v)) for v in k.values] if k.values is not None
                 else [(order(lo), order(hi)) for lo, hi in k.ranges])
        checks.append((k.column, order, spans, k.nulls))

    def keep(f: FileAction) -> bool:
        if not checks or not f.stats:
            return True
        stats = json.loads(f.stats, parse_float=Decimal)
        low, high = stats.get("minValues") or {}, stats.get("maxValues") or {}
        null_counts = stats.get("nullCount") or {}
        for column, order, spans, nulls in checks:
            if nulls and null_counts.get(column, 1) != 0:
                continue  # the file may hold NULL keys, which the filter keeps
            if column not in low or column not in high or low[column] is None or high[column] is None:
                continue
            lo, hi = order(low[column]), order(high[column])
            if not any(a <= hi and b >= lo for a, b in spans):
                return False
        return True

    return keep
