"""Write docs/APIS.md from the code (tidelog.broker.apis_doc) and docs/APIS.template.md; `--check` only says
whether the committed file is up to date (exit status 1 if not):

    .venv/bin/python scripts/gen_apis_doc.py [--check]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

from tidelog.broker.apis_doc import render  # noqa: E402

TEMPLATE = ROOT / "docs" / "APIS.template.md"
OUTPUT = ROOT / "docs" / "APIS.md"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with docs/APIS.md instead of writing it")
    args = parser.parse_args()
    try:
        text = render(TEMPLATE.read_text(encoding="utf-8"))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 1
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print("docs/APIS.md is out of date: run scripts/gen_apis_doc.py (make docs)", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
