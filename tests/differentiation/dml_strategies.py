"""Hypothesis strategies: base tables with a start state, random DML, end state and redundant delta.

Small value domains (and NULLs) make keys collide and rows duplicate. The delta is generated from
the DML sequence with stable per-row ids: an update is DELETE old + INSERT new with the same id, a
"rewrite" is a copy-on-write DELETE/INSERT pair of an unchanged row (a redundancy), and rows
inserted then deleted inside the interval leave both rows in the delta.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from diff_harness import BaseTable

OPS = ("insert", "update", "delete", "rewrite")


def _value(hi: int) -> st.SearchStrategy[int | None]:
    return st.one_of(st.none(), st.integers(0, hi))


@st.composite
def table_history(draw: Any, prefix: str, columns: dict[str, str], max_rows: int = 5,
                  max_ops: int = 6) -> BaseTable:
    """A BaseTable whose columns are small nullable ints (first column: 0..2, others 0..3)."""
    row = st.tuples(*[_value(2 if i == 0 else 3) for i in range(len(columns))])
    start_rows = draw(st.lists(row, max_size=max_rows))
    start = {f"{prefix}{i}": r for i, r in enumerate(start_rows)}
    state = dict(start)
    changes: list[tuple[str, str, tuple[Any, ...]]] = []
    next_id = len(start_rows)
    ops = draw(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 1000), row), max_size=max_ops))
    for op, pick, values in ops:
        ids = sorted(state)
        if op == "insert" or not ids:
            rid = f"{prefix}{next_id}"
            next_id += 1
            state[rid] = values
            changes.append(("INSERT", rid, values))
            continue
        rid = ids[pick % len(ids)]
        old = state[rid]
        if op == "update":
            changes += [("DELETE", rid, old), ("INSERT", rid, values)]
            state[rid] = values
        elif op == "delete":
            changes.append(("DELETE", rid, old))
            del state[rid]
        else:
            changes += [("DELETE", rid, old), ("INSERT", rid, old)]
    return BaseTable(dict(columns), start, state, changes)


R_COLUMNS = {"k": "INT", "v": "INT"}
S_COLUMNS = {"k": "INT", "w": "INT"}


def two_tables() -> st.SearchStrategy[dict[str, BaseTable]]:
    return st.fixed_dictionaries({"r": table_history("r", R_COLUMNS), "s": table_history("s", S_COLUMNS)})


def one_changed(changed: str) -> st.SearchStrategy[dict[str, BaseTable]]:
    """r and s, only `changed` of them with DML (the other the same at both ends)."""
    return st.fixed_dictionaries({"r": table_history("r", R_COLUMNS, max_ops=6 if changed == "r" else 0),
                                  "s": table_history("s", S_COLUMNS, max_ops=6 if changed == "s" else 0)})


M_COLUMNS = {"k": "INT", "d": "DECIMAL(10,2)"}


def decimal_table() -> st.SearchStrategy[dict[str, BaseTable]]:
    return st.fixed_dictionaries({"m": table_history("m", M_COLUMNS, max_rows=6)})
