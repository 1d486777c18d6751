"""Long chains of one associative operator, regrouped for sqlglot's scope analysis and restored afterwards.

sqlglot parses ``v + v + ... + v`` into a left-deep tree as deep as it is long, and its scope analysis walks from
every column up to its SELECT (``Scope.columns``, used by ``qualify_tables`` and ``qualify``), so qualifying n terms
costs n^2 steps (figures: bench/README.md, "Measurements behind design choices"). Regrouped into a balanced tree,
operands in the same order, the walk is log n long; the regrouped tree reads the same columns and gets the same
type. Validation checks the regrouped tree and drops it (``shallow``); a statement that is stored (a dynamic
table's query) is qualified regrouped and given back its written shape (``regrouped``), so its text does not change.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlglot import exp

# Operators whose chains may be regrouped without changing which columns they read or the type sqlglot gives them.
ASSOCIATIVE = (exp.Add, exp.Mul, exp.And, exp.Or, exp.DPipe, exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor)
# Chains up to this many operands are left as written (every ordinary query).
LONGEST_CHAIN = 64


@dataclass(frozen=True)
class _Balanced:
    root: exp.Expr  # the balanced tree now standing where the chain was
    kind: type[exp.Expr]
    made: frozenset[int]  # ids of the operator nodes the regrouping made (the rest are the chain's operands)


def _balance(tree: exp.Expr, longest: int) -> list[_Balanced]:
    heads = [node for node in tree.find_all(*ASSOCIATIVE)
             if not (type(node.parent) is type(node) and node.arg_key == "this")]
    done = []
    for head in heads:
        kind, operands, node = type(head), [], head
        while type(node) is kind:  # down the left spine: ((a + b) + c) + d
            operands.append(node.expression)
            node = node.this
        operands.append(node)
        if len(operands) <= longest:
            continue
        level, made = operands[::-1], set()
        while len(level) > 1:
            paired = []
            for i in range(0, len(level), 2):
                if i + 1 < len(level):
                    paired.append(kind(this=level[i], expression=level[i + 1]))
                    made.add(id(paired[-1]))
                else:
                    paired.append(level[i])
            level = paired
        head.replace(level[0])
        done.append(_Balanced(level[0], kind, frozenset(made)))
    return done


def shallow(tree: exp.Expr, longest: int = LONGEST_CHAIN) -> exp.Expr:
    """``tree`` (changed in place) with every chain of one associative operator longer than ``longest`` operands
    regrouped into a balanced tree, operands in the same order: ``a + b + c + d`` -> ``(a + b) + (c + d)``."""
    _balance(tree, longest)
    return tree


@contextmanager
def regrouped(tree: exp.Expr, longest: int = LONGEST_CHAIN) -> Iterator[exp.Expr]:
    """``tree`` regrouped as ``shallow`` does while the block runs (which may change it in place, e.g. qualify
    its columns), then every regrouped chain rebuilt left-deep from its operands as they are then."""
    done = _balance(tree, longest)
    yield tree
    for b in reversed(done):  # inner chains first: an outer chain sees a restored inner one as one operand
        operands: list[exp.Expr] = []
        stack = [b.root]
        while stack:  # in order: left subtree, then right
            node = stack.pop()
            if id(node) in b.made:
                stack += [node.expression, node.this]
            else:
                operands.append(node)
        chain = operands[0]
        for operand in operands[1:]:
            chain = b.kind(this=chain, expression=operand)
        b.root.replace(chain)
