"""glibc malloc settings for the broker process (Kafka tunes its JVM heap; this is the equivalent knob).

With glibc's defaults a request or fetch buffer of more than 128 KiB (a 1 MiB produce batch, a multi-MiB fetch
slice) is a fresh mmap: the kernel zero-fills and maps every 4 KiB page on first touch and unmaps it on free,
and that page-fault work cost more broker CPU than the rest of such a request (bench/compare.py: 1.24 -> 0.74
CPU-s per GB on 1 MiB producer batches). Serving those sizes from the heap, and letting the heap keep up to
`TRIM_THRESHOLD` of freed memory instead of returning it at once, lets the same pages be reused request after
request. The retained memory is bounded by the trim threshold and shows in the broker's RSS.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc's <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's maximum (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD = 64 * 1024 * 1024


def tune_malloc() -> bool:
    """Apply the settings on glibc (Linux); elsewhere, or if libc cannot be loaded, do nothing. True if applied.
    Environment variables MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ set by the operator win."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: libc's, without a library search
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt)
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied = True
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        applied &= mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        applied &= mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    if not applied:
        log.debug("mallopt refused the broker's malloc settings")
    return applied
