"""Issue 22, item 4: secrets in dtables.yml (storage keys in Spark settings, passwords in URIs, secret vars) never
appear in what the command line prints: errors, logs, --json."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dtables import secrets
from dtables.project.config import parse_config

AZURE_KEY = "c2VjcmV0LWF6dXJlLXN0b3JhZ2Uta2V5LTEyMzQ1Njc4OTA="
S3_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
URI_PASSWORD = "hunter2-in-the-uri"
TOKEN = "ghp_exampletoken0123456789"

CONFIG = f"""\
name: p
warehouse: warehouse
spark:
  conf:
    spark.sql.shuffle.partitions: "4"
vars:
  api_token: {TOKEN}
  min_amount: 10
profiles:
  prod:
    warehouse: s3a://AKIAEXAMPLE:{URI_PASSWORD}@bucket/wh
    spark:
      conf:
        spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net: "{AZURE_KEY}"
        spark.hadoop.fs.s3a.secret.key: "{S3_SECRET}"
        spark.sql.ansi.enabled: "true"
"""
ALL = (AZURE_KEY, S3_SECRET, URI_PASSWORD, TOKEN)


def test_secret_settings_are_found_in_every_profile_and_masked():
    import yaml

    found = secrets.secret_values(yaml.safe_load(CONFIG))
    assert sorted(found) == sorted(ALL)  # not "4", "10" or "true"
    parse_config(CONFIG)  # loading registers them
    text = f"cannot reach abfss://c@acct: key {AZURE_KEY}; s3a://AKIAEXAMPLE:{URI_PASSWORD}@bucket, 4 partitions"
    masked = secrets.redact(text)
    assert not any(s in masked for s in ALL) and "4 partitions" in masked and masked.count(secrets.MASK) == 2


def test_logs_written_through_the_cli_streams_are_masked():
    parse_config(CONFIG)
    out = io.StringIO()
    handler = logging.StreamHandler(secrets.RedactingStream(out))  # what `dtables daemon` logs through
    log = logging.getLogger("dtables.test_secrets")
    log.addHandler(handler)
    try:
        log.error("refresh failed: 403 for key %s", AZURE_KEY)
    finally:
        log.removeHandler(handler)
    assert AZURE_KEY not in out.getvalue() and "403 for key " + secrets.MASK in out.getvalue()


def _dtables(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "dtables.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


def test_cli_errors_never_print_a_secret(tmp_path):
    (tmp_path / "dtables.yml").write_text(CONFIG)
    (tmp_path / "models").mkdir()
    # a secret var that ends up in an error message, and a warehouse URI with a password in an error
    (tmp_path / "models" / "m.sql").write_text("SELECT 1 AS x FROM {{ var('api_token') }}\n")
    validate = _dtables("validate", "--profile", "prod", cwd=tmp_path)
    status = _dtables("status", "--json", "--profile", "prod", cwd=tmp_path)
    for result in (validate, status):
        assert result.returncode == 1
        printed = result.stdout + result.stderr
        assert not any(s in printed for s in ALL), printed
        assert secrets.MASK in printed, printed
    assert "unknown table" in validate.stderr and "not on the local file system" in status.stderr


@pytest.mark.slow  # starts Spark in a subprocess
def test_cli_json_output_and_spark_settings_never_print_a_secret(tmp_path):
    (tmp_path / "dtables.yml").write_text(CONFIG.replace("s3a://AKIAEXAMPLE:hunter2-in-the-uri@bucket/wh",
                                                         "warehouse"))
    key = "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net"
    shown = _dtables("sql", "--json", "--profile", "prod", "-e", f"SET {key}", cwd=tmp_path)
    listed = _dtables("sql", "--json", "--profile", "prod", "-e", "SET", cwd=tmp_path)
    for result in (shown, listed):
        assert result.returncode == 0, result.stderr
        assert not any(s in result.stdout + result.stderr for s in ALL), result.stdout
    assert key in listed.stdout
