"""TPC-H data with tpchgen-cli (PyPI), as one Parquet file per table, cached per scale factor."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from bench.tpch.schema import TABLES


def _tpchgen() -> str:
    here = Path(sys.executable).parent / "tpchgen-cli"  # installed next to the running interpreter (the venv)
    found = str(here) if here.exists() else shutil.which("tpchgen-cli")
    if found is None:
        raise SystemExit("tpchgen-cli is not installed: pip install -e '.[bench]' (or pip install tpchgen-cli)")
    return found


def generate(scale_factor: float, root: Path) -> Path:
    """The folder holding `<table>.parquet` for every TPC-H table at `scale_factor`; generated once."""
    folder = root / f"sf{scale_factor:g}"
    marker = folder / ".complete"
    if marker.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([_tpchgen(), "parquet", "-s", f"{scale_factor:g}", "-o", str(folder), "--overwrite"],
                   check=True, capture_output=True)
    missing = [t for t in TABLES if not (folder / f"{t}.parquet").exists()]
    if missing:
        raise SystemExit(f"tpchgen-cli wrote no file for {', '.join(missing)} in {folder}")
    marker.touch()
    return folder
