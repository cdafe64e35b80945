"""CRC-32C (Castagnoli), as record batches and producer snapshots use it.

The `crc32c` package's `__init__` imports its command-line module (argparse) and looks its own version up
through importlib.metadata: 5-20 ms of start-up on the path to the first answered request. Only its extension
module is needed, so it is loaded on its own from the package's directory; any surprise in the package's
layout falls back to the ordinary import.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from collections.abc import Callable
from typing import Any


def _load() -> Callable[[Any], int]:
    try:
        spec = importlib.util.find_spec("crc32c")  # locates the package without running its __init__
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        for directory in locations:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(directory, "_crc32c" + suffix)
                if os.path.exists(path):
                    loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", path)
                    ext_spec = importlib.util.spec_from_file_location("crc32c._crc32c", path, loader=loader)
                    if ext_spec is not None:
                        module = importlib.util.module_from_spec(ext_spec)
                        loader.exec_module(module)
                        fn: Callable[[Any], int] = module.crc32c
                        return fn
    except (ImportError, OSError, AttributeError):
        pass
    from crc32c import crc32c as public

    return public


crc32c = _load()

__all__ = ["crc32c"]
