"""Secrets from ``dtables.yml`` (storage keys, passwords, tokens in Spark settings, vars and URIs) kept out of output.

A setting is secret when its key matches ``SECRET_KEYS``: Spark's own ``spark.redaction.regex`` default
(``secret|password|token|access.key``) widened to the spellings of cloud storage keys (Azure's
``fs.azure.account.key.<account>``, SAS tokens, credentials). Loading a project registers the values of such settings
(and the password of any URI with one); ``redact`` replaces every registered value in a text, and the command line
writes all its output (errors, logs, ``--json``) through ``RedactingStream``. Spark gets the same pattern as its
``spark.redaction.regex`` unless one is set, so its UI, event logs and ``SET`` output hide them too.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TextIO
from urllib.parse import urlparse

SECRET_KEYS = re.compile(
    r"(?i)secret|password|passwd|token|credential|access[._-]?key|account[._-]?key|private[._-]?key|api[._-]?key"
    r"|signature|[._]sas[._]|sas[._-]?token")
# What Spark receives as spark.redaction.regex (Java regex syntax; the same alternatives).
SPARK_REDACTION_REGEX = SECRET_KEYS.pattern
MASK = "*********(redacted)"
# Values too short or too common to be told apart from ordinary words in output are not registered.
_NOT_SECRETS = {"true", "false", "none", "null", "yes", "no"}
_MIN_LENGTH = 4

_lock = threading.Lock()
_secrets: set[str] = set()


def is_secret_key(key: str) -> bool:
    return SECRET_KEYS.search(key) is not None


def _uri_password(value: Any) -> str | None:
    if not isinstance(value, str) or "://" not in value:
        return None
    try:
        return urlparse(value).password
    except ValueError:
        return None


def secret_values(settings: Any, key: str = "") -> list[str]:
    """Every secret in a nested structure of settings (mappings, lists, strings): values under a secret-looking key,
    and passwords inside URIs (``s3a://id:secret@bucket``)."""
    out: list[str] = []
    if isinstance(settings, Mapping):
        for k, v in settings.items():
            out += secret_values(v, str(k) if not key else f"{key}.{k}")
    elif isinstance(settings, (list, tuple)):
        for v in settings:
            out += secret_values(v, key)
    elif settings is not None and not isinstance(settings, bool):
        text = str(settings)
        if is_secret_key(key):
            out.append(text)
        password = _uri_password(text)
        if password:
            out.append(password)
    return [v for v in out if len(v) >= _MIN_LENGTH and v.lower() not in _NOT_SECRETS]


def register(values: Iterable[str]) -> None:
    """Remember secrets so that ``redact`` hides them from now on (for the life of the process)."""
    with _lock:
        _secrets.update(values)


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by a mask (longest first, so a secret inside another goes too)."""
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


class RedactingStream:
    """A text stream that writes through to ``stream`` with the registered secrets masked."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, encoding, fileno, ... of the real stream
        return getattr(self._stream, name)
