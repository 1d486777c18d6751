"""A standalone master and worker started from the pip install on free loopback ports, stopped by PID."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dtables.spark.servers import Cluster, start_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = start_cluster(cores=2, memory="2g", log_dir=tmp_path_factory.mktemp("cluster"))
    yield started
    started.stop()
