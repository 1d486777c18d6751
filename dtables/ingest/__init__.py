"""Streaming ingestion (seed 004): rows flow into Delta tables through named channels with offset tokens.

The client (``dtables.Client``: opens/drops channels, runs the flusher) is ``dtables.client``. Modules here, top
down: ``channel`` (a handle: validate,
buffer in order, commit exactly once), ``lifecycle`` (open/reopen/drop: reconcile, bump the epoch, fence),
``commits`` (a channel's Delta commits and reading them back from the log), ``convert`` (seed 004's type table),
``target`` (the table's location and schema), ``store`` (the channels table of the state store), ``loader`` (the
resumable file load of ``dtables ingest``), ``statements`` (SHOW CHANNELS; its syntax is
``dtables.sql.channel_syntax``).
"""
