"""The optional compiled cleaner core (protocol/_cleaner_core.c): the per-record work of a cleaning pass, run with
the GIL released. `accelerator` is None when it is not built or TIDELOG_PURE_PYTHON is set; the pure-Python
cleaner (record_scan, offset_map, batch_filter) is then used and gives byte-identical segments."""

from __future__ import annotations

from typing import Any

from tidelog.accelerators import load

# Statuses of the chunk and file functions (see _cleaner_core.c).
DONE, MAP_FULL, NEED_PYTHON, OUT_FULL, PARTIAL = 0, 1, 2, 3, 4

accelerator: Any = load("tidelog.protocol._cleaner_core")
