"""Shared test setup. The broker fixtures (`tidelog_broker`, `tidelog_bootstrap`, `tidelog_broker_factory`)
come from the `tidelog` pytest plugin (tidelog/pytest_plugin.py, registered by the pytest11 entry point);
they are registered here too so the suite works without `pip install -e`."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `from tests.clients.conftest import ...` and a checkout without install

if not any(ep.name == "tidelog" for ep in importlib.metadata.entry_points(group="pytest11")):
    from tidelog.pytest_plugin import (  # noqa: F401 - fixtures and hooks, registered by being imported here
        pytest_configure,
        tidelog_bootstrap,
        tidelog_broker,
        tidelog_broker_factory,
        tidelog_broker_overrides,
        tidelog_module_broker,
        tidelog_schema_registry,
        tidelog_session_broker,
        tidelog_topic,
    )
