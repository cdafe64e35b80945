"""Print the Kafka APIs this broker registers (broker/apis/__init__.py API_MODULES) as a Markdown table:
key, name, versions served, versions advertised. Used to keep docs/APIS.md true:

    .venv/bin/python scripts/list_apis.py
"""

from __future__ import annotations

import importlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tidelog.broker.apis import API_MODULES  # noqa: E402 - runnable from a checkout


def main() -> None:
    rows = []
    for name in API_MODULES:
        try:
            mod = importlib.import_module(f"tidelog.broker.apis.{name}")
        except ImportError as exc:
            print(f"<!-- broker.apis.{name}: not importable ({exc}) -->")
            continue
        api = "".join(part.capitalize() for part in name.split("_"))
        adv_min = getattr(mod, "ADVERTISED_MIN", mod.MIN_VERSION)
        rows.append((mod.API_KEY, api, mod.MIN_VERSION, mod.MAX_VERSION, adv_min))
    print("| Key | API | Served | Advertised |")
    print("|---|---|---|---|")
    for key, api, lo, hi, adv in sorted(rows):
        print(f"| {key} | {api} | {lo}–{hi} | {adv}–{hi} |")


if __name__ == "__main__":
    main()
