"""Versioned schema migrations of the state store, applied in order, each exactly once.

Append new migrations at the end; never edit one that has shipped. ``PRAGMA user_version`` records the last one
applied, so opening an older store upgrades it and opening a newer one with old code is refused.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    # 1: catalog of the objects dtables created (tables, views), so a new session sees them by name.
    """
    CREATE TABLE objects (
        name        TEXT PRIMARY KEY,          -- normalized `db.name`
        kind        TEXT NOT NULL,             -- TABLE | VIEW
        location    TEXT,                      -- Delta table URI (tables)
        definition  TEXT,                      -- SELECT text (views)
        managed     INTEGER NOT NULL DEFAULT 1, -- 1: dtables owns the location and deletes it on DROP
        created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    );
    """,
)
