"""Derivative rules, one module per rule family, and the default node-type -> rule table."""

from __future__ import annotations

from differentiation.plan import Aggregate, Distinct, Filter, Generate, Join, Project, Scan, UnionAll, Window
from differentiation.rewrite import Rule
from differentiation.rules.aggregate import derive_aggregate_any
from differentiation.rules.distinct import derive_distinct
from differentiation.rules.filter_project import derive_filter, derive_generate, derive_project, derive_scan
from differentiation.rules.join import derive_join
from differentiation.rules.union import derive_union_all
from differentiation.rules.window import derive_window

# Ordered data, overridable by callers (differentiate(..., rules=...)); every relational node type
# must appear, which tests/differentiation/test_rules.py checks.
RULES: tuple[tuple[type, Rule], ...] = (
    (Scan, derive_scan),
    (Filter, derive_filter),
    (Project, derive_project),
    (Join, derive_join),
    (Aggregate, derive_aggregate_any),
    (UnionAll, derive_union_all),
    (Distinct, derive_distinct),
    (Window, derive_window),
    (Generate, derive_generate),
)

__all__ = ["RULES"]
