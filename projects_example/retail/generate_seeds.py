"""Generate the retail seed files (deterministic): python projects_example/retail/generate_seeds.py [N_ORDERS]."""

from __future__ import annotations

import csv
import datetime as dt
import random
import sys
from pathlib import Path

REGIONS = ["EMEA", "AMER", "APAC"]
CATEGORIES = ["books", "games", "garden", "kitchen"]


def main(n_orders: int = 400) -> None:
    rng = random.Random(42)
    seeds = Path(__file__).parent / "seeds"
    seeds.mkdir(exist_ok=True)
    customers = [(i, f"customer-{i:03d}", rng.choice(REGIONS)) for i in range(1, 61)]
    products = [(i, f"product-{i:03d}", rng.choice(CATEGORIES), f"{rng.uniform(2, 120):.2f}") for i in range(1, 41)]
    start = dt.date(2026, 1, 1)
    orders, lines = [], []
    for order_id in range(1, n_orders + 1):
        status = rng.choices(["NEW", "SHIPPED", "CANCELLED"], [5, 12, 1])[0]
        orders.append((order_id, rng.randint(1, 60), (start + dt.timedelta(days=rng.randint(0, 27))).isoformat(),
                       status))
        for line_no in range(1, rng.randint(1, 4) + 1):
            discount = rng.choice(["", "0.05", "0.10", "0.00"])
            lines.append((order_id, line_no, rng.randint(1, 40), rng.randint(1, 5), discount))
    for name, header, rows in [
        ("customers", ["customer_id", "name", "region"], customers),
        ("products", ["product_id", "title", "category", "price"], products),
        ("orders", ["order_id", "customer_id", "order_date", "status"], orders),
        ("order_lines", ["order_id", "line_no", "product_id", "quantity", "discount"], lines),
    ]:
        with open(seeds / f"{name}.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
