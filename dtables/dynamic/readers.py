"""The columns the dynamic tables over a source may read: what a change read shared by all of them must hold.

After a DELETE with deletion vectors, the rows it removed are picked out of whole files, and the first refresh of
the DAG that reads the interval keeps that read for the others (``changes.shared_reads``). Holding every column
costs what decoding them does: TPC-H's ``l_comment`` is about a third of lineitem's scan and no query reads it. So
the read keeps the columns any dynamic table over the source names; every refresh asks for the same set, so they
share it, and each checks that the set holds every column its own plan reads (``IntervalSources._kept``), so a
guess that is too small costs a read of its own, never a wrong row.

The guess is syntactic, from the stored queries: every column name a query mentions (whatever table it belongs
to), or every column where a query selects ``*`` (outside EXISTS) or joins NATURAL. Parsed once per query text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache

from sqlglot import exp

from dtables.dynamic.definition import Definition
from dtables.sql.dialect import parse_one


@lru_cache(maxsize=512)
def mentioned_columns(query: str) -> frozenset[str] | None:
    """The column names (lower case) ``query`` mentions, or None when it may read every column of a table."""
    tree = parse_one(query)
    for star in tree.find_all(exp.Star):
        if _reads_every_column(star):
            return None
    if any("NATURAL" in (join.kind, join.method) for join in tree.find_all(exp.Join)):
        return None
    # a column's qualifier too: ``s.f`` may be field f of a struct column s
    names = {part.lower() for c in tree.find_all(exp.Column) for part in (c.name, c.table) if part}
    for join in tree.find_all(exp.Join):
        names |= {i.name.lower() for i in join.args.get("using") or () if isinstance(i, exp.Expression)}
    return frozenset(names)


def _reads_every_column(star: exp.Star) -> bool:
    """Whether ``star`` (``*`` or ``t.*``) may stand for columns: anywhere (``struct(*)`` too) but as COUNT's
    argument, or in the SELECT list of an EXISTS subquery, which is never read."""
    node: exp.Expression = star.parent if isinstance(star.parent, exp.Column) else star
    select = node.parent
    if isinstance(select, exp.Count):
        return False
    if not isinstance(select, exp.Select) or node not in select.expressions:
        return True
    outer = select.parent
    while isinstance(outer, (exp.Subquery, exp.Paren)):
        outer = outer.parent
    return not isinstance(outer, exp.Exists)


def source_readers(definitions: Callable[[], Iterable[Definition]]) -> Callable[[str], frozenset[str] | None]:
    """For a source, the union of ``mentioned_columns`` over the definitions that read it (None: any column);
    ``definitions`` is called once, on the first question."""
    loaded: list[Definition] = []

    def readers(source: str) -> frozenset[str] | None:
        if not loaded:
            loaded.extend(definitions())
        names: set[str] = set()
        for d in loaded:
            if source in d.sources:
                mentioned = mentioned_columns(d.query)
                if mentioned is None:
                    return None
                names |= mentioned
        return frozenset(names)

    return readers
