"""dtables: declarative dynamic tables on Apache Spark and Delta Lake, maintained incrementally."""

from dtables.client import Client
from dtables.errors import ChangeTrackingError, DtablesError, ObjectNotFound, SqlError
from dtables.session import Session, connect

__version__ = "0.1.0"

__all__ = ["connect", "Session", "DtablesError", "SqlError", "ObjectNotFound", "ChangeTrackingError", "Client"]

