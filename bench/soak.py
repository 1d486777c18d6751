"""Fault soak: kill -9, at random moments, a process that refreshes a DAG, consumes a stream or ingests through a
channel, while this process writes to the sources; after each kill, recover and count rows lost and duplicated.

    python -m bench.soak --kills 300 [--work-dir DIR] [--seed N]

Each iteration starts a victim process (its own Spark driver) for one of the three kinds, in turn, and kills it
with SIGKILL either after a random delay or right after it committed to a Delta table (the supervisor watches the
table's ``_delta_log`` and kills as soon as a new commit file appears: data committed, bookkeeping maybe not).
Meanwhile a writer thread of this process inserts, updates and deletes rows of that kind's sources. After the kill
the writer pauses and this process recovers the way a user would (refreshes the DAG, consumes the stream, reopens
the channel), then checks:

- refresh: every dynamic table equals its query evaluated now (a row of the query missing is lost, a row beyond it
  duplicated), and no refresh is left EXECUTING;
- consume: two stream targets, written in one transaction, hold each change once: no (id, action) twice, and per
  id the inserts minus the deletes equal the rows the source holds; the stream is then empty;
- ingest: the producer's rows are exactly 1..T once each, T being the channel's committed offset token, and each
  row the writer inserted into the same table is there once.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from scheduler.vocabulary import RefreshState

REPO = Path(__file__).resolve().parents[1]
KINDS = ("refresh", "consume", "ingest")
STARTUP = 300  # seconds a victim may take to start Spark on a loaded machine
MAX_DELAY = {"refresh": 8.0, "consume": 5.0, "ingest": 4.0}  # a few of the victim's loop iterations
COMMIT_WAIT = 60.0  # an after-commit kill that sees no commit in this time kills anyway (counted as timed)

DAG = {  # name -> (target lag, query); `enriched` is refreshed for its downstreams only
    "enriched": ("DOWNSTREAM", "SELECT o.id, o.amount, c.region FROM orders o JOIN customers c ON o.cust = c.cust"),
    "by_region": ("1 minute", ("SELECT region, count(*) AS n, sum(amount) AS total, max(amount) AS top FROM enriched "
                              "GROUP BY region")),
    "big_orders": ("1 minute", "SELECT DISTINCT cust, amount FROM orders WHERE amount > 50"),
}
CONSUME = ("BEGIN; INSERT INTO tgt SELECT id, v, METADATA$ACTION FROM s; "
           "INSERT INTO tgt2 SELECT id, v, METADATA$ACTION FROM s; COMMIT")
CHANNEL, CHANNEL_TABLE = "numbers", "seq"
# A victim lives for seconds: the JIT's first tier only, which starts the JVM and Spark's first jobs faster.
VICTIM_CONF = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
WRITER_PAUSE = (0.3, 1.5)  # seconds between the writer's statements: a steady stream that leaves CPU to the victim


# --- the victims: each loops until killed ------------------------------------------------------------------------

def victim(kind: str, warehouse: str) -> None:
    import dtables

    session = dtables.connect(warehouse, master="local[1]", spark_conf=VICTIM_CONF)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return  # the supervisor stopped before this victim's turn
    if kind == "refresh":
        while True:
            session.refresh(list(DAG))
    elif kind == "consume":
        while True:
            session.sql(CONSUME)
    else:
        _produce(session)


def _produce(session: Any) -> None:
    from dtables.client import Client

    rng = random.Random()
    client = Client(session, max_client_lag=0.2)
    channel = client.open_channel(CHANNEL, CHANNEL_TABLE)
    token = channel.get_latest_committed_offset_token()
    n = int(token) + 1 if token else 1
    while True:
        last = n + rng.randint(0, 150)
        channel.insert_rows([{"n": i, "who": "producer"} for i in range(n, last + 1)], offset_token=str(last))
        n = last + 1
        time.sleep(rng.uniform(0, 0.01))


# --- the writer: another process's DML on the sources, paused while recovering and checking ----------------------

class Writer(threading.Thread):
    def __init__(self, session: Any, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.session, self.rng = session, rng
        self.kind: str | None = None
        self.lock = threading.Lock()  # held for each statement; pause() waits for the one under way
        self.stopped = False
        self.next_id = 1
        self.live: dict[str, set[int]] = {"orders": set(), "src": set()}
        self.written: set[int] = set()  # rows of `seq` the writer inserted and saw committed
        self.statements = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        while not self.stopped:
            with self.lock:
                if self.kind is not None:
                    try:
                        self._write(self.kind)
                        self.statements += 1
                    except BaseException as e:  # noqa: BLE001 - reported by the supervisor, which stops
                        self.error, self.stopped = e, True
            time.sleep(self.rng.uniform(*WRITER_PAUSE))

    def pause(self) -> None:
        with self.lock:
            self.kind = None

    def resume(self, kind: str) -> None:
        with self.lock:
            self.kind = kind

    def _ids(self, n: int) -> list[int]:
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        return ids

    def _write(self, kind: str) -> None:
        sql, rng = self.session.sql, self.rng
        if kind == "refresh":
            op = rng.random()
            if op < 0.45 or len(self.live["orders"]) < 20:
                ids = self._ids(rng.randint(1, 20))
                rows = ", ".join(f"({i}, {rng.randint(0, 11)}, {self._amount()})" for i in ids)
                sql(f"INSERT INTO orders VALUES {rows}")
                self.live["orders"].update(ids)
            elif op < 0.7:
                ids = rng.sample(sorted(self.live["orders"]), rng.randint(1, 10))
                sql(f"UPDATE orders SET amount = {self._amount()} WHERE id IN ({', '.join(map(str, ids))})")
            elif op < 0.9:
                ids = rng.sample(sorted(self.live["orders"]), rng.randint(1, 10))
                sql(f"DELETE FROM orders WHERE id IN ({', '.join(map(str, ids))})")
                self.live["orders"].difference_update(ids)
            else:
                sql(f"UPDATE customers SET region = 'r{rng.randint(0, 4)}' WHERE cust = {rng.randint(0, 11)}")
        elif kind == "consume":
            if rng.random() < 0.7 or len(self.live["src"]) < 10:
                ids = self._ids(rng.randint(1, 30))
                sql(f"INSERT INTO src VALUES {', '.join(f'({i}, {_v(i)})' for i in ids)}")
                self.live["src"].update(ids)
            else:
                ids = rng.sample(sorted(self.live["src"]), rng.randint(1, 8))
                sql(f"DELETE FROM src WHERE id IN ({', '.join(map(str, ids))})")
                self.live["src"].difference_update(ids)
        else:
            ids = self._ids(rng.randint(1, 30))
            rows = ", ".join(f"({i}, 'writer')" for i in ids)
            sql(f"INSERT INTO {CHANNEL_TABLE} VALUES {rows}")
            self.written.update(ids)

    def _amount(self) -> str:
        return "NULL" if self.rng.random() < 0.05 else f"{self.rng.randint(1, 10000) / 100}"


def _v(i: int) -> str:
    return "NULL" if i % 17 == 0 else f"'v{i}'"


# --- set-up, recovery and checks ---------------------------------------------------------------------------------

def set_up(session: Any) -> None:
    sql = session.sql
    sql("CREATE TABLE orders (id BIGINT, cust INT, amount DECIMAL(12, 2))")  # exact sums: no rounding noise
    sql("CREATE TABLE customers (cust INT, region STRING)")
    sql("INSERT INTO customers VALUES " + ", ".join(f"({c}, 'r{c % 4}')" for c in range(10)) + ", (NULL, 'r9')")
    for name, (lag, query) in DAG.items():
        lag_sql = "DOWNSTREAM" if lag == "DOWNSTREAM" else f"'{lag}'"
        sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = {lag_sql} REFRESH_MODE = INCREMENTAL AS {query}")
    sql("CREATE TABLE src (id BIGINT, v STRING)")
    sql("CREATE STREAM s ON TABLE src")
    sql("CREATE TABLE tgt (id BIGINT, v STRING, action STRING)")
    sql("CREATE TABLE tgt2 (id BIGINT, v STRING, action STRING)")
    sql(f"CREATE TABLE {CHANNEL_TABLE} (n BIGINT NOT NULL, who STRING)")


@dataclasses.dataclass
class Check:
    lost: int = 0
    duplicated: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)
    samples: list[str] = dataclasses.field(default_factory=list)  # a few of the rows lost or duplicated


def recover_and_check(kind: str, session: Any, writer: Writer) -> Check:
    return {"refresh": _refresh_check, "consume": _consume_check, "ingest": _ingest_check}[kind](session, writer)


def _refresh_check(session: Any, writer: Writer) -> Check:
    from dtables.dynamic import history
    from dtables.dynamic.definition import ROW_ID_COLUMN

    records = session.refresh(list(DAG))  # reconciles the killed refresh from the Delta log first
    check = Check()
    for r in records:
        if r.action not in ("NO_DATA", "INCREMENTAL"):
            check.problems.append(f"{r.name} refreshed {r.action}")
    for name, (_, query) in DAG.items():
        actual = _multiset(session.table(name).drop(ROW_ID_COLUMN).collect())
        expected = _multiset(session.sql(query).collect())
        missing, extra = expected - actual, actual - expected
        check.lost += sum(missing.values())
        check.duplicated += sum(extra.values())
        if missing or extra:
            check.samples.append(f"{name}: missing {list(missing)[:3]}, extra {list(extra)[:3]}")
        stuck = [r.refresh_id for r in history.records(session.store, name) if r.state == RefreshState.EXECUTING]
        if stuck:
            check.problems.append(f"{name}: refreshes {stuck} left EXECUTING")
    return check


def _consume_check(session: Any, writer: Writer) -> Check:
    session.sql(CONSUME)  # finishes the killed consumption first, then consumes what came after
    check = Check()
    present = collections.Counter(r.id for r in session.sql("SELECT id FROM src").collect())
    for target in ("tgt", "tgt2"):
        rows = _multiset((r.id, r.action) for r in session.sql(f"SELECT id, action FROM {target}").collect())
        check.duplicated += sum(n - 1 for n in rows.values() if n > 1)
        net: collections.Counter = collections.Counter()
        for (i, action), n in rows.items():
            net[i] += n if action == "INSERT" else -n
        for i in set(net) | set(present):
            diff = net[i] - present[i]
            check.duplicated += max(diff, 0)
            check.lost += max(-diff, 0)
    left = session.sql("SELECT count(*) AS n FROM s").first().n
    if left:
        check.problems.append(f"the stream still shows {left} changes after its consumption")
    return check


def _ingest_check(session: Any, writer: Writer) -> Check:
    from dtables.client import Client

    with Client(session) as client:  # reopening the channel is the producer's recovery
        token = client.open_channel(CHANNEL, CHANNEL_TABLE).get_latest_committed_offset_token()
    committed = int(token) if token else 0
    check = Check()
    for who, expected in (("producer", set(range(1, committed + 1))), ("writer", writer.written)):
        counts = _multiset(r.n for r in session.sql(f"SELECT n FROM {CHANNEL_TABLE} WHERE who = '{who}'").collect())
        check.lost += len(expected - set(counts))
        check.duplicated += sum(n - 1 for n in counts.values()) + sum(n for i, n in counts.items() if i not in expected)
    return check


def _multiset(rows: Any) -> collections.Counter:
    return collections.Counter(r if isinstance(r, (int, tuple)) else tuple(r) for r in rows)


# --- the supervisor ----------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Tally:
    kills: int = 0
    after_commit: int = 0
    recoveries: int = 0
    lost: int = 0
    duplicated: int = 0


def _delta_log(session: Any, name: str) -> Path:
    location = session.catalog.lookup(name)["location"]
    return Path(location.removeprefix("file:")) / "_delta_log"


def _commits(log: Path) -> set[str]:
    return {f for f in os.listdir(log) if f.endswith(".json")}


def _kill_after_commit(child: subprocess.Popen, logs: list[Path], marker: str | None) -> bool:
    """SIGKILL as soon as one of ``logs`` gains a commit (holding ``marker``, when given); False on timeout."""
    seen = {log: _commits(log) for log in logs}
    deadline = time.monotonic() + COMMIT_WAIT
    while time.monotonic() < deadline and child.poll() is None:
        for log in logs:
            new = _commits(log) - seen[log]
            if new and (marker is None or any(marker in (log / f).read_text() for f in new)):
                child.send_signal(signal.SIGKILL)
                return True
            seen[log] |= new
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    return False


class Victim:
    """A victim process started ahead of its turn: it starts Spark, says ``ready`` and waits for ``go``, so its
    start-up overlaps the previous victim's recovery and check."""

    def __init__(self, kind: str, warehouse: Path) -> None:
        self.kind = kind
        self.errors = tempfile.TemporaryFile("w+")
        env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(REPO)}
        self.process = subprocess.Popen([sys.executable, "-m", "bench.soak", "--victim", kind, "--work-dir",
                                         str(warehouse)], cwd=REPO, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.errors, text=True)

    def go(self) -> None:
        assert self.process.stdout is not None and self.process.stdin is not None
        if self.process.stdout.readline().strip() != "ready":
            self.process.wait(timeout=STARTUP)
            raise RuntimeError(f"{self.kind} victim did not start:\n{self.stderr()}")
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)

    def stderr(self) -> str:
        self.errors.seek(0)
        return self.errors.read()[-3000:]

    def close(self) -> None:
        if self.process.poll() is None:
            self.kill()
            self.process.wait(timeout=60)
        self.errors.close()


def run_soak(session: Any, warehouse: Path, kills: int, *, seed: int | None = None, after_commit: float = 0.5,
             log: Callable[[str], None] = print) -> dict[str, Tally]:
    """Kill ``kills`` victims, the three kinds in turn, a share ``after_commit`` of them right after a commit and
    the others after a random delay; return the tally per kind. Stops at a victim that fails by itself or a check
    that finds a problem other than a count (raised as RuntimeError)."""
    rng = random.Random(seed)
    set_up(session)
    writer = Writer(session, random.Random(rng.random()))
    writer.start()
    tallies = {kind: Tally() for kind in KINDS}
    watched = {"refresh": (list(DAG), None), "consume": (["tgt", "tgt2"], None),
               "ingest": ([CHANNEL_TABLE], f"dtables-ingest:{CHANNEL}:")}
    standby: Victim | None = Victim(KINDS[0], warehouse) if kills else None
    try:
        for i in range(kills):
            kind, victim = KINDS[i % len(KINDS)], standby
            assert victim is not None
            tally, started = tallies[kind], time.monotonic()
            writer.resume(kind)
            try:
                victim.go()
                ready = time.monotonic()
                if rng.random() < after_commit:
                    names, marker = watched[kind]
                    how = "after commit" if _kill_after_commit(
                        victim.process, [_delta_log(session, n) for n in names], marker) else "timed out"
                else:
                    time.sleep(rng.uniform(0, MAX_DELAY[kind]))
                    victim.kill()
                    how = "timed"
                code = victim.process.wait(timeout=60)
                writer.pause()
                if writer.error is not None:
                    raise RuntimeError(f"the writer failed: {writer.error!r}")
                if code != -signal.SIGKILL:
                    raise RuntimeError(f"{kind} victim exited {code} before its kill:\n{victim.stderr()}")
            finally:
                victim.close()
            standby = Victim(KINDS[(i + 1) % len(KINDS)], warehouse) if i + 1 < kills else None
            tally.kills += 1
            tally.after_commit += how == "after commit"
            killed = time.monotonic()
            check = recover_and_check(kind, session, writer)
            tally.recoveries += 1
            tally.lost += check.lost
            tally.duplicated += check.duplicated
            log(f"kill {i + 1}/{kills}: {kind}, {how}; start {ready - started:.1f} s, run {killed - ready:.1f} s, "
                f"recover and check {time.monotonic() - killed:.1f} s; "
                f"lost {check.lost}, duplicated {check.duplicated}"
                + "".join(f"; {p}" for p in check.problems + check.samples))
            if check.problems:
                raise RuntimeError(f"{kind}: " + "; ".join(check.problems))
    finally:
        writer.stopped = True
        writer.pause()
        if standby is not None:
            standby.close()
    return tallies


def report(tallies: dict[str, Tally]) -> str:
    lines = ["| kind | kills | right after a commit | recoveries | lost | duplicated |",
             "| --- | --- | --- | --- | --- | --- |"]
    total = Tally()
    for kind, t in tallies.items():
        lines.append(f"| {kind} | {t.kills} | {t.after_commit} | {t.recoveries} | {t.lost} | {t.duplicated} |")
        for field in dataclasses.fields(Tally):
            setattr(total, field.name, getattr(total, field.name) + getattr(t, field.name))
    lines.append(f"| all | {total.kills} | {total.after_commit} | {total.recoveries} | {total.lost} | "
                 f"{total.duplicated} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=300)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--after-commit", type=float, default=0.5,
                        help="share of the kills made right after a commit (the others after a random delay)")
    parser.add_argument("--work-dir", help="warehouse (default: a new temporary folder)")
    parser.add_argument("--victim", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.victim:
        victim(args.victim, args.work_dir)
        return 0
    import dtables

    warehouse = Path(args.work_dir or tempfile.mkdtemp(prefix="dtables-soak-"))
    session = dtables.connect(warehouse, master="local[1]")
    tallies = run_soak(session, warehouse, args.kills, seed=args.seed, after_commit=args.after_commit)
    print(report(tallies))
    bad = sum(t.lost + t.duplicated for t in tallies.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
