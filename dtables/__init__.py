"""dtables: declarative dynamic tables on Apache Spark and Delta Lake, maintained incrementally."""

from dtables.errors import ChangeTrackingError, DtablesError, ObjectNotFound, SqlError
from dtables.session import Session, connect

__version__ = "0.1.0"

__all__ = ["connect", "Session", "DtablesError", "SqlError", "ObjectNotFound", "ChangeTrackingError", "Client"]


def __getattr__(name: str) -> object:
    # The ingestion client imports PySpark's types; loaded on first use so `import dtables` stays light.
    if name == "Client":
        from dtables.client import Client

        return Client
    raise AttributeError(f"module 'dtables' has no attribute {name!r}")
