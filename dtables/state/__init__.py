"""The state store: definitions, frontiers and history for fast lookup (SQLite by default)."""

from dtables.state.store import StateStore

__all__ = ["StateStore"]
