"""Streaming ingestion (seed 004): rows flow into Delta tables through named channels with offset tokens."""
