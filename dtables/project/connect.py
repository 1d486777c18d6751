"""Open a dtables session for a project folder (warehouse, state store and Spark settings from dtables.yml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dtables.project.config import ProjectConfig, load_config
from dtables.session import Session, connect


def resolve_warehouse(folder: Path, config: ProjectConfig) -> str:
    """A relative warehouse path is relative to the project folder; URIs stay as written."""
    if urlparse(config.warehouse).scheme:
        return config.warehouse
    return str((folder / config.warehouse).resolve())


def connect_project(folder: str | Path, profile: str | None = None, spark: Any = None) -> Session:
    folder = Path(folder)
    config = load_config(folder, profile)
    return connect(resolve_warehouse(folder, config), master=config.spark.master,
                           remote=config.spark.remote, spark_conf=config.spark.conf,
                           state_store=config.state_store, spark=spark)
