"""The retail project end to end: apply, load, refresh, change some source rows, refresh again, print history.

Run with ``make demo`` or ``.venv/bin/python projects_example/retail_demo.py``. The same steps on the command line:
``cd projects_example/retail && dtables apply && dtables refresh && dtables sql -e "UPDATE ..." && dtables refresh
&& dtables history``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from dtables.project import load_project
from dtables.project.connect import connect_project
from dtables.project.deploy import apply_plan, plan_project

HERE = Path(__file__).parent / "retail"


def show_refresh(records: list[Any]) -> None:
    for r in records:
        print(f"  {r.name:<26} {r.action:<12} {r.state:<10} +{r.rows_inserted or 0} -{r.rows_deleted or 0} "
              f"~{r.rows_updated or 0}  ({r.reason})")


def main(workdir: Path, spark: Any = None) -> None:
    project_dir = workdir / "retail"
    shutil.rmtree(project_dir, ignore_errors=True)
    shutil.copytree(HERE, project_dir, ignore=shutil.ignore_patterns("warehouse"))
    session = connect_project(project_dir, spark=spark)
    project = load_project(project_dir)

    print("\n== dtables plan")
    changes = plan_project(session, project)
    for c in changes:
        print(f"  {c.kind:<14} {c.name:<26} {c.status:<9} {c.refresh:<12} {c.reason}")
    print("\n== dtables apply (creates, seeds and initializes every table)")
    apply_plan(session, project, changes)

    print("\n== daily revenue per region (first days)")
    session.sql("SELECT order_date, region, lines, revenue, avg_line FROM daily_revenue "
                "ORDER BY order_date, region LIMIT 6").show()

    print("== change some source rows: a new order, a cancelled order, a price change")
    session.sql("""
        INSERT INTO orders VALUES (10001, 7, DATE'2026-01-05', 'NEW');
        INSERT INTO order_lines VALUES (10001, 1, 3, 2, NULL), (10001, 2, 5, 1, 0.10);
        UPDATE orders SET status = 'CANCELLED' WHERE order_id = 12;
        UPDATE products SET price = price * 1.10 WHERE product_id = 9;
    """)
    print("\n== dtables refresh (incremental where the query allows)")
    show_refresh(session.refresh(["daily_revenue", "top_customers"]))

    print("\n== a refresh with nothing new upstream is NO_DATA")
    show_refresh(session.refresh(["daily_revenue"]))

    print("\n== dtables history")
    session.history().select("name", "trigger", "action", "state", "rows_inserted", "rows_deleted",
                             "rows_updated").show(50, truncate=False)
    print(f"project copy and warehouse: {project_dir}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.gettempdir()) / "dtables-demo")
