"""The ``dtables`` command line. Each verb lives in a small module; exit codes are non-zero on failure."""

from __future__ import annotations

from dtables.cli.app import app
from dtables.cli import project_cmds, refresh_cmds, sql_cmds  # noqa: F401  (register the verbs)
from dtables.cli import stream_cmds  # noqa: F401  (streams, vacuum)
from dtables.cli import daemon_cmds  # noqa: F401  (daemon, status)
from dtables.cli import ingest_cmds  # noqa: F401  (ingest)


def main() -> None:
    import sys

    from dtables.secrets import RedactingStream

    # Everything the command prints (results, --json, errors, logs, tracebacks) passes the secrets of dtables.yml
    # through a mask; the streams are wrapped before any verb runs, the secrets registered as the project loads.
    sys.stdout = RedactingStream(sys.stdout)  # type: ignore[assignment]
    sys.stderr = RedactingStream(sys.stderr)  # type: ignore[assignment]
    app()


__all__ = ["app", "main"]
