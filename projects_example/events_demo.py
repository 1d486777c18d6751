"""The events project end to end: click events flow in through an ingestion channel and the dynamic tables built on
them (sessions, a daily funnel, daily sessions per country) follow incrementally.

    .venv/bin/python projects_example/events_demo.py [WORKDIR] [--users 200] [--days 3] [--batches 3]

Steps: copy the project to WORKDIR (a temp folder by default) and apply it; feed the generated events through
channel ``web-1`` in batches (offset token = the event's number), refreshing after each; let a producer "crash" with
rows still buffered, reopen the channel as a new producer and resume after the committed offset token; refresh,
print the funnel and the refresh history; check that every event landed exactly once, that each dynamic table
equals its query recomputed, and that the refreshes after ingestion were INCREMENTAL. Exits 1 if a check fails.
The same steps on the command line are in projects_example/events/README.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent / "events"))

from generate_events import generate  # noqa: E402  (the project's own generator, next to its dtables.yml)

from dtables import Client  # noqa: E402
from dtables.ingest.errors import ChannelInvalidatedError  # noqa: E402
from dtables.project import load_project  # noqa: E402
from dtables.project.connect import connect_project  # noqa: E402
from dtables.project.deploy import apply_plan, plan_project  # noqa: E402
from dtables.testing import assert_same_rows  # noqa: E402

HERE = Path(__file__).parent / "events"
MODELS = ("user_sessions", "funnel_daily", "daily_sessions")
CHANNEL = "web-1"
CHUNK = 100  # rows per insert_rows call; each call carries the number of its last event as offset token


def show_refresh(records: list[Any]) -> None:
    for r in records:
        print(f"  {r.name:<24} {r.action:<12} {r.state:<10} +{r.rows_inserted or 0} -{r.rows_deleted or 0} "
              f"~{r.rows_updated or 0}  ({r.reason})")


def send(channel: Any, events: list[dict[str, Any]], first: int) -> None:
    """Insert events numbered first, first+1, ... in chunks, each chunk's offset token its last event's number."""
    for at in range(0, len(events), CHUNK):
        chunk = events[at:at + CHUNK]
        response = channel.insert_rows(chunk, offset_token=first + at + len(chunk) - 1)
        if response.errors:
            raise SystemExit(f"rejected rows: {response.errors[:3]}")


def resume_after_crash(session: Any, events: list[dict[str, Any]], first: int) -> list[str]:
    """A producer buffers a batch and dies before its buffer is committed; a new producer reopens the channel (which
    discards the old handle's buffer and fences it off) and resumes after the committed offset token."""
    problems: list[str] = []
    crashed = Client(session, max_client_lag="10 minutes")  # nothing commits unless flushed
    ch = crashed.open_channel(CHANNEL, "clicks")
    half = len(events) // 2
    send(ch, events[:half], first)
    ch.flush()                                               # the first half is committed...
    send(ch, events[half:], first + half)                    # ...the rest only buffered when the producer "dies"
    print(f"  producer 1 committed events up to {ch.get_latest_committed_offset_token()} and buffered "
          f"{len(events) - half} more, then stopped without closing its channel")

    with Client(session) as client:
        resumed = client.open_channel(CHANNEL, "clicks")
        token = resumed.get_latest_committed_offset_token()
        print(f"  producer 2 reopened {CHANNEL}: committed offset token {token}; resending from event "
              f"{int(token or 0) + 1}")
        if token != str(first + half - 1):
            problems.append(f"after the crash the committed token is {token}, expected {first + half - 1}")
        start = int(token or 0) + 1 - first
        send(resumed, events[start:], first + start)
        resumed.close()
        print(f"  producer 2 done: committed offset token {resumed.get_latest_committed_offset_token()}")
    try:  # had producer 1 lived on (a zombie), its buffered rows could never land after the reopen's fence
        ch.flush()
        problems.append("the crashed producer's stale channel handle still committed after the reopen")
    except ChannelInvalidatedError as e:
        print(f"  producer 1's stale handle is fenced off: {e}")
    try:
        crashed.close()
    except ChannelInvalidatedError:
        pass  # reported above
    return problems


def check(session: Any, project: Any, events: list[dict[str, Any]]) -> list[str]:
    """Every event exactly once in clicks; every dynamic table equal to its query; INCREMENTAL refreshes."""
    problems: list[str] = []
    # timestamps formatted by Spark, in the session time zone the events were read in (not Python's local one)
    landed = session.sql("SELECT user_id, session_id, event_type, page, date_format(ts, 'yyyy-MM-dd HH:mm:ss'), "
                         "CAST(amount AS STRING) FROM clicks").collect()
    sent = [(e["user_id"], e["session_id"], e["event_type"], e["page"], e["ts"].replace("T", " "), e["amount"])
            for e in events]
    try:
        assert_same_rows(landed, sent)
    except AssertionError as e:
        problems.append(f"clicks differ from the {len(events)} events sent: {e}")
    for name in MODELS:
        try:
            assert_same_rows(session.sql(f"SELECT * FROM {name}").collect(),
                             session.sql(project.dynamic_table(name).query).collect())
        except AssertionError as e:
            problems.append(f"{name} differs from its query recomputed: {e}")
    manual = [r for r in session.history().collect() if r.trigger == "MANUAL"]
    for name in MODELS:
        actions = [r.action for r in manual if r.name == f"default.{name}"]
        if "INCREMENTAL" not in actions or set(actions) - {"INCREMENTAL", "NO_DATA"}:
            problems.append(f"{name}: refreshes after ingestion were {actions}, expected INCREMENTAL (or NO_DATA)")
    return problems


def main(workdir: Path, spark: Any = None, users: int = 200, days: int = 3, batches: int = 3) -> int:
    """Run the demo in a copy of the project under `workdir`; 0 when every check passed, else 1. The events are
    fed in `batches` batches (at least 2), a refresh after each; the producer crashes during the last one."""
    project_dir = workdir / "events"
    shutil.rmtree(project_dir, ignore_errors=True)
    shutil.copytree(HERE, project_dir, ignore=shutil.ignore_patterns("warehouse", "__pycache__", "*.jsonl"))
    session = connect_project(project_dir, spark=spark)
    project = load_project(project_dir)

    print("\n== dtables plan / apply")
    changes = plan_project(session, project)
    for c in changes:
        print(f"  {c.kind:<14} {c.name:<24} {c.status:<9} {c.refresh:<12} {c.reason}")
    apply_plan(session, project, changes)

    events = generate(users, days)
    batches = max(batches, 2)
    parts = [events[i * len(events) // batches:(i + 1) * len(events) // batches] for i in range(batches)]
    print(f"\n== {len(events)} click events of {users} users over {days} days, in {len(parts)} batches")
    first = 1
    with Client(session) as client:
        channel = client.open_channel(CHANNEL, "clicks")
        for n, batch in enumerate(parts[:-1], 1):
            send(channel, batch, first)
            channel.flush()
            first += len(batch)
            print(f"\n== batch {n}: {len(batch)} events committed, offset token "
                  f"{channel.get_latest_committed_offset_token()}; dtables refresh")
            show_refresh(session.refresh(list(MODELS)))
        channel.close()

    print(f"\n== batch {len(parts)}: {len(parts[-1])} events, and a producer crash in the middle")
    problems = resume_after_crash(session, parts[-1], first)
    session.sql("SHOW CHANNELS IN TABLE clicks").select("name", "offset_token", "rows_committed").show()
    print("== dtables refresh")
    show_refresh(session.refresh(list(MODELS)))

    print("\n== funnel_daily")
    session.sql("SELECT day, viewed, added_to_cart, checked_out, purchased, view_to_cart, cart_to_checkout, "
                "checkout_to_purchase, conversion, revenue FROM funnel_daily ORDER BY day").show(truncate=False)
    print("== daily_sessions (first rows)")
    session.sql("SELECT * FROM daily_sessions ORDER BY day, country").show(6)
    print("== dtables history")
    session.history().select("name", "trigger", "action", "state", "rows_inserted", "rows_deleted",
                             "rows_updated").show(50, truncate=False)

    problems += check(session, project, events)
    for p in problems:
        print(f"FAILED: {p}", file=sys.stderr)
    print("all checks passed" if not problems else f"{len(problems)} check(s) failed")
    print(f"project copy and warehouse: {project_dir}")
    session.close()
    return 1 if problems else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The events project end to end.")
    parser.add_argument("workdir", nargs="?", default=str(Path(tempfile.gettempdir()) / "dtables-events-demo"))
    parser.add_argument("--users", type=int, default=200, help="users sending events (1..200)")
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--batches", type=int, default=3, help="ingestion batches, a refresh after each (>= 2)")
    args = parser.parse_args()
    sys.exit(main(Path(args.workdir), users=args.users, days=args.days, batches=args.batches))
