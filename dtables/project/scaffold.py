"""``dtables init``: a small working project a newcomer understands in a minute."""

from __future__ import annotations

from pathlib import Path

from dtables.project.config import ProjectError

FILES = {
    "dtables.yml": """\
# A dtables project: sources are tables you load, models are dynamic tables dtables keeps fresh.
name: {name}
warehouse: warehouse          # a folder here, or any URI Spark can write (s3a://bucket/path)
defaults:
  target_lag: 1 minute        # how stale a dynamic table may get
  refresh_mode: AUTO          # INCREMENTAL when the query allows, FULL otherwise
vars:
  min_amount: 10
""",
    "sources/sales.sql": """\
-- Source tables: plain CREATE TABLE statements. seeds/<table>.csv loads first rows when the table is new.
CREATE TABLE sales (sale_id INT, store STRING, amount DECIMAL(10, 2), sold_on DATE);
""",
    "seeds/sales.csv": """\
sale_id,store,amount,sold_on
1,north,25.00,2026-01-01
2,south,8.50,2026-01-01
3,north,40.00,2026-01-02
4,east,12.75,2026-01-02
""",
    "models/big_sales.sql": """\
-- A dynamic table per file, named after the file. Settings go in leading comment lines.
-- target_lag: DOWNSTREAM
SELECT sale_id, store, amount, sold_on
FROM {{ ref('sales') }}
WHERE amount >= {{ var('min_amount') }}
""",
    "models/store_totals.sql": """\
-- target_lag: 1 minute
SELECT store, COUNT(*) AS sales, SUM(amount) AS total
FROM {{ ref('big_sales') }}
GROUP BY store
""",
    "macros/README.md": "Jinja macros in *.sql files here can be called from every SQL file of the project.\n",
    ".gitignore": "warehouse/\n",
}


def init_project(folder: Path, name: str | None = None) -> list[Path]:
    """Write the scaffold into ``folder`` (created if missing); refuse to overwrite an existing project."""
    if (folder / "dtables.yml").exists():
        raise ProjectError(f"{folder / 'dtables.yml'} exists already; init does not overwrite a project")
    written = []
    for relative, text in FILES.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.format(name=name or folder.resolve().name) if relative == "dtables.yml" else text)
        written.append(path)
    return written
