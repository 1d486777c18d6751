"""Benchmark: streaming ingestion through channels vs one plain DataFrame append of the same rows.

Measured side by side in one run, on one warehouse:
- baseline: ``createDataFrame(rows).write.mode("append")`` of all ``--rows`` rows in one Delta commit (rows already
  converted, no validation, no offset tokens);
- one channel: ``insert_rows`` in batches of ``--batch`` rows (dicts, validated and converted), each with an offset
  token, at the default lag; timed until ``close()`` returned (everything committed);
- four channels on one table, one producer thread each, a quarter of the rows each;
- latency: from ``insert_rows`` of one row until a query sees it, at the default lag (1 s), ``--samples`` times,
  against a one-row DataFrame append (the cost of a commit alone).
Prints rows per second and the ratios. Run: ``python bench/bench_ingest.py --rows 200000``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import tempfile
import threading
import time
from typing import Any

COLUMNS = "id BIGINT NOT NULL, name STRING, amount DOUBLE, at TIMESTAMP"


def _rows(start: int, count: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"name-{i}", "amount": i * 0.25, "at": "2024-05-01T12:00:00"}
            for i in range(start, start + count)]


def _feed(channel: Any, rows: list[dict[str, Any]], batch: int) -> None:
    for i in range(0, len(rows), batch):
        chunk = rows[i:i + batch]
        channel.insert_rows(chunk, offset_token=str(chunk[-1]["id"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    import dtables
    from dtables.changes.log import DeltaLog
    from dtables.ingest import store as cs
    from dtables.client import Client
    from dtables.ingest.commits import write_schema

    folder = tempfile.mkdtemp(prefix="bench_ingest_")
    session = dtables.connect(f"{folder}/wh", master=args.master)
    for name in ("base", "one", "four", "lag"):
        session.sql(f"CREATE TABLE {name} ({COLUMNS})")
    rows = _rows(0, args.rows)
    print(f"rows={args.rows} batch={args.batch} master={args.master}")

    # Warm-up (JIT, Delta classes): one small append each way, not measured.
    schema = write_schema(session.spark.table("base").schema)
    at = dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc)
    session.spark.createDataFrame([(-1, "w", 0.0, at)], schema).write.format("delta").mode("append").save(
        session.catalog.lookup("base")["location"])
    with Client(session) as client:
        warm = client.open_channel("warm", "lag")
        warm.insert_rows(_rows(-10, 1))
        warm.close()

    base = session.catalog.lookup("base")["location"]
    tuples = [(r["id"], r["name"], r["amount"], at) for r in rows]
    t0 = time.perf_counter()
    session.spark.createDataFrame(tuples, schema).coalesce(1).write.format("delta").mode("append").save(base)
    base_s = time.perf_counter() - t0

    with Client(session) as client:
        channel = client.open_channel("single", "one")
        t0 = time.perf_counter()
        _feed(channel, rows, args.batch)
        channel.close()
        one_s = time.perf_counter() - t0

        channels = [client.open_channel(f"p{k}", "four") for k in range(4)]
        quarter = (args.rows + 3) // 4
        threads = [threading.Thread(target=_feed, args=(channels[k], rows[k * quarter:(k + 1) * quarter], args.batch))
                   for k in range(4)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c in channels:
            c.close()
        four_s = time.perf_counter() - t0
    # Every row exactly once, and every channel's committed token the id of the last row it sent (issue 16: four
    # channels once lost rows while their tokens advanced).
    for name in ("one", "four"):
        counts = session.sql(f"SELECT count(*) AS n, count(DISTINCT id) AS d FROM {name}").first()
        print(f"checked {name}: {counts['n']} rows, {counts['d']} distinct ids, expected {args.rows}")
        assert (counts["n"], counts["d"]) == (args.rows, args.rows), f"{name}: rows lost or duplicated"
    for k, c in enumerate([channel, *channels]):
        sent = rows if k == 0 else rows[(k - 1) * quarter:k * quarter]
        stored = cs.get(session.store, c.table, c.name)
        assert stored is not None and stored.offset_token == str(sent[-1]["id"]), (c.name, stored)
    print("checked tokens: 5 channels, each at the id of its last row")

    # Latency at the default lag: poll the log (no Spark job) until the commit lands, then confirm with a query.
    location = session.catalog.lookup("lag")["location"]
    latencies, appends = [], []
    with Client(session) as client:
        channel = client.open_channel("latency", "lag")
        for sample in range(args.samples):
            version = DeltaLog(session.spark, location).latest_version
            t0 = time.perf_counter()
            channel.insert_rows(_rows(10_000_000 + sample, 1), offset_token=str(sample))
            while DeltaLog(session.spark, location).latest_version == version:
                time.sleep(0.01)
            latencies.append(time.perf_counter() - t0)
            assert session.sql(f"SELECT count(*) FROM lag WHERE id = {10_000_000 + sample}").first()[0] == 1
            t0 = time.perf_counter()
            session.spark.createDataFrame([(-2 - sample, "a", 0.0, at)], schema).coalesce(1).write \
                .format("delta").mode("append").save(base)
            appends.append(time.perf_counter() - t0)
        channel.close()

    base_rate, one_rate, four_rate = args.rows / base_s, args.rows / one_s, args.rows / four_s
    print(f"{'path':<32} {'seconds':>8} {'rows/s':>10} {'vs baseline':>12}")
    print(f"{'baseline: one DataFrame append':<32} {base_s:>8.2f} {base_rate:>10.0f} {1.0:>12.2f}")
    print(f"{'one channel':<32} {one_s:>8.2f} {one_rate:>10.0f} {one_rate / base_rate:>12.2f}")
    print(f"{'four channels, one table':<32} {four_s:>8.2f} {four_rate:>10.0f} {four_rate / base_rate:>12.2f}")
    lat, app = statistics.median(latencies), statistics.median(appends)
    print(f"insert->visible at max_client_lag=1s: median {lat:.2f} s, max {max(latencies):.2f} s "
          f"over {args.samples}; one-row append alone: median {app:.2f} s; latency - lag = {lat - 1.0:.2f} s "
          f"({(lat - 1.0) / app:.2f}x a one-row append)")
    session.close()
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
