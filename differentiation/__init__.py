"""Pure query differentiation (paper 3.2): SQL -> plan IR -> change plan -> one sqlglot query. No I/O."""

from __future__ import annotations

from differentiation.build import build_plan, prepare
from differentiation.columns import columns_read
from differentiation.derive import Derivative, differentiate
from differentiation.errors import UnsupportedQuery
from differentiation.delta_nodes import KeyFilter, KeyProbe, Snapshot
from differentiation.output import (
    changes_query, explain, key_probes, merges_state, snapshot_query, state_merge_query,
)
from differentiation.prune import PruneSite
from differentiation.rules import RULES
from differentiation.shared_reads import HeldRead, KeyRead
from differentiation.sources import HeldSources, Sources
from differentiation.support import incremental_reason
from differentiation.vocabulary import ChangeFormat, ChangeStats, Shape

__all__ = [
    "RULES", "ChangeFormat", "ChangeStats", "Derivative", "HeldRead", "HeldSources", "KeyFilter", "KeyProbe",
    "KeyRead", "PruneSite", "Shape", "Snapshot",
    "Sources", "UnsupportedQuery", "build_plan", "changes_query", "columns_read", "differentiate", "explain",
    "incremental_reason", "key_probes", "merges_state", "prepare", "snapshot_query", "state_merge_query",
]
