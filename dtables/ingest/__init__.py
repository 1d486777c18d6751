"""Streaming ingestion (seed 004): rows flow into Delta tables through named channels with offset tokens.

Modules, top down: ``client`` (Client: opens/drops channels, runs the flusher), ``channel`` (a handle: validate,
buffer in order, commit exactly once), ``lifecycle`` (open/reopen/drop: reconcile, bump the epoch, fence),
``commits`` (a channel's Delta commits and reading them back from the log), ``convert`` (seed 004's type table),
``target`` (the table's location and schema), ``store`` (the channels table of the state store), ``loader`` (the
resumable file load of ``dtables ingest``), ``syntax``/``statements`` (SHOW CHANNELS).
"""
