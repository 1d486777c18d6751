"""Named fail points for crash tests: ``DTABLES_STREAM_CRASH_AT=<point>`` kills the process (SIGKILL) there.

A real kill, not an exception: nothing after the point runs, no ``finally`` block, no flush; exactly what a crashed
driver leaves behind. Unset (always, outside crash tests) it costs one environment lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "DTABLES_STREAM_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
