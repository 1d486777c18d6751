"""Generate click events for the events project, deterministically (seeded).

    python projects_example/events/generate_events.py [--users 200] [--days 3] [--seed 7] [-o events.jsonl]
    python projects_example/events/generate_events.py --users-csv   # rewrite seeds/users.csv

Each user visits on some days, in one or more sessions that start mostly in the daytime. A session is a walk down
the funnel: a few page views, then with falling probability add_to_cart (amount: the item's price), checkout and
purchase (amount: the cart total). Events are a few seconds to minutes apart. About one user in twelve blocks the
session cookie: their events carry no session_id. The output is sorted by time; as JSON lines, an event's line
number is its offset token (what ``dtables ingest`` uses), so the demo and the command line agree on positions.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import random
import sys
from pathlib import Path
from typing import Any

START = dt.datetime(2026, 3, 2)
COUNTRIES = ["DE", "FR", "US", "BR", "IN", "JP"]
PRODUCTS = {f"/p/{i:03d}": round(random.Random(i).uniform(4, 180), 2) for i in range(1, 61)}
LANDING = ["/", "/search", "/deals", "/c/books", "/c/garden", "/c/kitchen"]
USERS_CSV = Path(__file__).parent / "seeds" / "users.csv"
MAX_USERS = 200


def users(n: int = MAX_USERS, seed: int = 11) -> list[tuple[int, str, str, str]]:
    """The users dimension: (user_id, country, signup_date, plan)."""
    rng = random.Random(seed)
    return [(i, rng.choice(COUNTRIES), (START.date() - dt.timedelta(days=rng.randint(1, 700))).isoformat(),
             rng.choices(["free", "plus"], [4, 1])[0]) for i in range(1, n + 1)]


def _session(rng: random.Random, user_id: int, session_id: str | None, at: dt.datetime) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    def emit(event_type: str, page: str, amount: float | None = None) -> None:
        nonlocal at
        events.append({"user_id": user_id, "session_id": session_id, "event_type": event_type, "page": page,
                       "ts": at.isoformat(timespec="seconds"),
                       "amount": None if amount is None else f"{amount:.2f}"})
        at += dt.timedelta(seconds=rng.randint(4, 240))

    emit("view", rng.choice(LANDING))
    cart: list[float] = []
    for _ in range(rng.choices([0, 1, 2, 3, 5, 8], [3, 4, 4, 3, 2, 1])[0]):
        page = rng.choice(list(PRODUCTS))
        emit("view", page)
        if rng.random() < 0.22:
            cart.append(PRODUCTS[page])
            emit("add_to_cart", page, PRODUCTS[page])
    if cart and rng.random() < 0.55:
        emit("checkout", "/checkout")
        if rng.random() < 0.7:
            emit("purchase", "/checkout/done", sum(cart))
    return events


def generate(n_users: int = MAX_USERS, days: int = 3, seed: int = 7) -> list[dict[str, Any]]:
    """Click events of users 1..n_users over `days` days from START, sorted by time (then user)."""
    if not 1 <= n_users <= MAX_USERS:
        raise ValueError(f"n_users must be 1..{MAX_USERS} (the users seeded in seeds/users.csv)")
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    for user_id in range(1, n_users + 1):
        blocks_cookie = rng.random() < 1 / 12
        for day in range(days):
            for n in range(rng.choices([0, 1, 2, 3], [5, 6, 2, 1])[0]):
                hour = rng.choices(range(24), [1] * 7 + [3] * 12 + [2] * 5)[0]
                at = START + dt.timedelta(days=day, hours=hour, minutes=rng.randint(0, 59), seconds=rng.randint(0, 59))
                session_id = None if blocks_cookie else f"s{user_id:03d}-{day}-{n}-{rng.getrandbits(24):06x}"
                events.extend(_session(rng, user_id, session_id, at))
    events.sort(key=lambda e: (e["ts"], e["user_id"]))
    return events


def write_jsonl(events: list[dict[str, Any]], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")


def write_users_csv(path: Path = USERS_CSV) -> None:
    path.parent.mkdir(exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["user_id", "country", "signup_date", "plan"])
        writer.writerows(users())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=MAX_USERS)
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("-o", "--output", default="-", help="JSON lines file (default: standard output)")
    parser.add_argument("--users-csv", action="store_true", help="write seeds/users.csv instead")
    args = parser.parse_args(argv)
    if args.users_csv:
        write_users_csv()
        return
    events = generate(args.users, args.days, args.seed)
    if args.output == "-":
        for e in events:
            sys.stdout.write(json.dumps(e) + "\n")
    else:
        write_jsonl(events, Path(args.output))
        print(f"{len(events)} events -> {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
