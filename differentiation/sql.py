"""Small sqlglot builders the compiler shares: quoted names, typed casts, NULL-safe row-id hashes."""

from __future__ import annotations

from sqlglot import exp

from differentiation.vocabulary import ACTION, INSERT


def ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    """A quoted column reference, optionally qualified by a (quoted) relation alias."""
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def alias(e: exp.Expr, name: str) -> exp.Alias:
    return exp.Alias(this=e, alias=ident(name))


def string(value: str) -> exp.Literal:
    return exp.Literal.string(value)


def number(value: int) -> exp.Expr:  # a negative number is Neg(Literal)
    return exp.Literal.number(value)


def cast(e: exp.Expr, to: str) -> exp.Cast:
    return exp.Cast(this=e, to=exp.DataType.build(to, dialect="spark"))


def call(name: str, *args: exp.Expr) -> exp.Anonymous:
    """A Spark function call kept verbatim (sqlglot does not translate anonymous calls)."""
    return exp.Anonymous(this=name, expressions=list(args))


def is_insert(action: exp.Expr | None = None) -> exp.EQ:
    return exp.EQ(this=action if action is not None else col(ACTION), expression=string(INSERT))


def sign(action: exp.Expr | None = None) -> exp.Case:
    """+1 for an INSERT, -1 for a DELETE."""
    return exp.Case(ifs=[exp.If(this=is_insert(action), true=number(1))], default=exp.Neg(this=number(1)))


def hash_ids(parts: list[exp.Expr]) -> exp.Expr:
    """An opaque id from several nullable strings: unambiguous (length-prefixed), NULL-safe ('~').

    The text of every id must stay the same across releases: dynamic tables store these ids and match on them."""
    coded = [call("coalesce", call("concat", cast(call("length", p), "STRING"), string(":"), p), string("~"))
             for p in parts]
    return call("sha1", call("concat", *coded))


def hash_values(values: list[exp.Expr]) -> exp.Expr:
    """Row id of a group or a distinct row: a hash of its values cast to strings (NULL-safe)."""
    if not values:
        return call("sha1", string("scalar aggregate"))
    return hash_ids([cast(v, "STRING") for v in values])
