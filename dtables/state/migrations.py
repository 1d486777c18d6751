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
    # 2: dynamic tables (definitions, chosen refresh mode, data timestamp, frontier) and their refresh history.
    """
    CREATE TABLE dynamic_tables (
        name                TEXT PRIMARY KEY,      -- normalized `db.name`
        query               TEXT NOT NULL,         -- the SELECT, Spark SQL with sources fully qualified
        sources             TEXT NOT NULL,         -- JSON list of the tables and dynamic tables it reads
        columns             TEXT NOT NULL,         -- JSON [[name, spark type, comment or null], ...]
        target_lag          TEXT NOT NULL,         -- '<n> minutes' or DOWNSTREAM
        refresh_mode        TEXT NOT NULL,         -- requested: AUTO | INCREMENTAL | FULL
        refresh_mode_chosen TEXT NOT NULL,         -- INCREMENTAL | FULL
        refresh_mode_reason TEXT NOT NULL,         -- why, in words
        initialize          TEXT NOT NULL,         -- ON_CREATE | ON_SCHEDULE
        state               TEXT NOT NULL DEFAULT 'ACTIVE', -- ACTIVE | SUSPENDED
        comment             TEXT,
        definition_hash     TEXT NOT NULL,
        initialized_hash    TEXT,                  -- definition hash the contents were computed with
        source_identities   TEXT,                  -- JSON {source: "<delta table id>:<schema hash>"} at last refresh
        data_timestamp      TEXT,                  -- ISO UTC; NULL until the first refresh
        data_version        INTEGER,               -- Delta version of the table holding the data at data_timestamp
        frontier            TEXT,                  -- JSON {source: Delta version} read by the last refresh
        refresh_seq         INTEGER NOT NULL DEFAULT 0, -- txnVersion of the last committed refresh
        created_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    );
    CREATE TABLE refresh_history (
        refresh_id      TEXT PRIMARY KEY,
        name            TEXT NOT NULL,
        sequence        INTEGER,                   -- txnVersion of the commit (NULL when nothing is written)
        trigger         TEXT NOT NULL,             -- MANUAL | SCHEDULED | CREATION
        action          TEXT,                      -- NO_DATA | INCREMENTAL | FULL | REINITIALIZE
        reason          TEXT,
        data_timestamp  TEXT NOT NULL,
        frontier_before TEXT,                      -- JSON {source: version}
        frontier_after  TEXT,
        rows_inserted   INTEGER,
        rows_deleted    INTEGER,
        rows_updated    INTEGER,
        target_version  INTEGER,                   -- version of the table holding the data as of data_timestamp
        started_at      TEXT NOT NULL,
        ended_at        TEXT,
        state           TEXT NOT NULL,             -- EXECUTING | SUCCEEDED | FAILED | CANCELLED | UPSTREAM_FAILED
        error           TEXT
    );
    CREATE INDEX refresh_history_by_table ON refresh_history(name, started_at);
    """,
    # 3: streams (bookmarks on a source: frontier per base table, consume sequence, a pending consumption).
    """
    CREATE TABLE streams (
        name              TEXT PRIMARY KEY,       -- normalized `db.name`
        source            TEXT NOT NULL,          -- normalized source name
        source_kind       TEXT NOT NULL,          -- TABLE | VIEW | DYNAMIC TABLE
        mode              TEXT NOT NULL,          -- DEFAULT | APPEND_ONLY
        flavor            TEXT NOT NULL,          -- SNOWFLAKE | SINGDATA (decides the metadata columns)
        show_initial_rows INTEGER NOT NULL,       -- 1 until the first consumption has returned the snapshot
        frontier          TEXT NOT NULL,          -- JSON {base table: Delta version}
        consumed_at       TEXT NOT NULL,          -- ISO UTC: when the frontier last advanced (or creation)
        seq               INTEGER NOT NULL DEFAULT 0, -- consume sequence: txnVersion of the last consumption
        pending           TEXT,                   -- JSON of a consumption begun but not yet recorded (recovery)
        comment           TEXT,
        created_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    );
    CREATE INDEX streams_by_source ON streams(source);
    """,
    # 4: the scheduler daemon's failure state (consecutive failed scheduled refreshes, suspensions it made).
    """
    CREATE TABLE scheduler_failures (
        name                 TEXT PRIMARY KEY,  -- normalized `db.name` of a dynamic table
        consecutive_failures INTEGER NOT NULL DEFAULT 0, -- failed SCHEDULED refreshes since the last success
        suspended_reason     TEXT,              -- why the daemon suspended it (NULL: not suspended by the daemon)
        updated_at           TEXT NOT NULL
    );
    """,
    # 5: streaming ingestion channels (per table and name): epoch, idempotent-write app id, last commit's token.
    """
    CREATE TABLE channels (
        table_name     TEXT NOT NULL,           -- normalized `db.name` of the table the channel writes
        name           TEXT NOT NULL,           -- the channel's name as given
        app_id         TEXT NOT NULL,           -- txnAppId of its Delta commits (unique per channel incarnation)
        epoch          INTEGER NOT NULL,        -- bumped by every open; handles of an older epoch are invalid
        seq            INTEGER NOT NULL DEFAULT 0, -- txnVersion of its newest commit in the log (epoch << 32 | n)
        log_version    INTEGER NOT NULL,        -- table version of that commit (reconciliation reads the log after it)
        offset_token   TEXT,                    -- offset token of the newest commit carrying rows or a token
        committed_at   TEXT,                    -- ISO UTC time of that commit
        rows_committed INTEGER NOT NULL DEFAULT 0, -- rows committed through the channel
        on_error       TEXT NOT NULL,           -- CONTINUE | SKIP_BATCH | ABORT of the current handle
        created_at     TEXT NOT NULL,
        opened_at      TEXT NOT NULL,
        PRIMARY KEY (table_name, name)
    );
    """,
    # 6: where each refresh spent its time: how it wrote, Spark jobs, seconds inside them and on the driver, input.
    """
    ALTER TABLE refresh_history ADD COLUMN write_kind TEXT;       -- NONE | APPEND | MERGE | REWRITE | OVERWRITE
    ALTER TABLE refresh_history ADD COLUMN spark_jobs INTEGER;
    ALTER TABLE refresh_history ADD COLUMN job_seconds REAL;      -- union of the jobs' run times
    ALTER TABLE refresh_history ADD COLUMN driver_seconds REAL;   -- wall time outside any Spark job
    ALTER TABLE refresh_history ADD COLUMN bytes_read INTEGER;    -- input bytes of the jobs' stages
    ALTER TABLE refresh_history ADD COLUMN records_read INTEGER;
    """,
    # 7: the snapshot reads a refresh narrowed by the keys of its changes (JSON list; see dtables.changes.keys).
    """
    ALTER TABLE refresh_history ADD COLUMN pruning TEXT;  -- [{table, at, keys, files, of}], files read of all
    """,
    # 8: declared keys (PRIMARY KEY, UNIQUE, FOREIGN KEY; see dtables.catalog.constraints): Delta has no place for them.
    """
    CREATE TABLE table_keys (
        table_name         TEXT NOT NULL,     -- normalized `db.name` of the table declaring the key
        name               TEXT NOT NULL,     -- the constraint's name (given, or made up from table and columns)
        kind               TEXT NOT NULL,     -- PRIMARY KEY | UNIQUE | FOREIGN KEY
        columns            TEXT NOT NULL,     -- JSON list of the table's columns, in key order
        rely               INTEGER NOT NULL,  -- 1: RELY (dtables may use it), 0: NORELY
        referenced         TEXT,              -- FOREIGN KEY: normalized name of the referenced table
        referenced_columns TEXT,              -- FOREIGN KEY: JSON list of its columns, paired with `columns`
        PRIMARY KEY (table_name, name)
    );
    """,
    # 9: AUTO's cost model (dtables/dynamic/cost.py): its estimates, choice and reason, and the sizes they scale with.
    """
    ALTER TABLE refresh_history ADD COLUMN estimate_incremental_s REAL;  -- estimated seconds of an INCREMENTAL
    ALTER TABLE refresh_history ADD COLUMN estimate_full_s REAL;         -- estimated seconds of a FULL
    ALTER TABLE refresh_history ADD COLUMN cost_choice TEXT;     -- INCREMENTAL | FULL (NULL: the model did not decide)
    ALTER TABLE refresh_history ADD COLUMN cost_reason TEXT;     -- why, e.g. "FULL: 52% of default.lineitem changed"
    ALTER TABLE refresh_history ADD COLUMN source_bytes INTEGER; -- bytes of the sources at frontier_after
    ALTER TABLE refresh_history ADD COLUMN change_bytes INTEGER; -- bytes of the data files the interval added/removed
    """,
    # 10: intermediate dynamic tables (dtables/dynamic/intermediates.py): the table each one is kept for.
    """
    ALTER TABLE dynamic_tables ADD COLUMN parent TEXT;         -- NULL: a user's table; else the table it is kept for
    ALTER TABLE dynamic_tables ADD COLUMN written_query TEXT;  -- as written, where `query` reads intermediates
    """,
)
