"""Which optional C accelerators this install carries and uses (`tidelog serve` logs it once at start).

Every compiled extension module inside the `tidelog` package counts: nothing here lists them, so an accelerator
added to setup.py is reported as soon as it is built. Each is active when it imports and TIDELOG_PURE_PYTHON is
unset (every accelerator's loader falls back to its pure-Python twin on either). `declared_extensions(setup.py)`
reads the names setup.py declares, for the checks that a wheel or an image carries all of them:

    python -m tidelog.accelerators --check path/to/setup.py   # exit 1 unless every declared one is active
"""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PACKAGE_ROOT = Path(__file__).resolve().parent


def load(name: str) -> Any:
    """The optional compiled module `name` (setup.py builds it where a compiler is), or None when it is not built
    or TIDELOG_PURE_PYTHON is set: the caller then runs its pure-Python twin. The one loader of every accelerator
    (imported on the broker's start-up path: this module imports nothing heavy until `status` or `main` run)."""
    if os.environ.get("TIDELOG_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:  # a machine without a compiler, or a module built for another interpreter
        return None


def compiled_modules(root: Path = PACKAGE_ROOT) -> list[str]:
    """Dotted names of the extension modules (`.so`/`.pyd`) under the tidelog package."""
    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
    names = set()
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for file in files:
            suffix = next((s for s in suffixes if file.endswith(s)), None)
            if suffix is not None:
                relative = Path(directory, file[: -len(suffix)]).relative_to(root.parent)
                names.add(".".join(relative.parts))
    return sorted(names)


def status() -> dict[str, Any]:
    """{"active": [...], "failed": {name: error}, "pure_python_forced": bool} for this process."""
    forced = bool(os.environ.get("TIDELOG_PURE_PYTHON"))
    active: list[str] = []
    failed: dict[str, str] = {}
    for name in compiled_modules():
        try:
            importlib.import_module(name)
        except ImportError as exc:  # built for another interpreter, or a missing symbol
            failed[name] = str(exc)
            continue
        if not forced:
            active.append(name)
    return {"active": active, "failed": failed, "pure_python_forced": forced}


def log_status(logger: Any) -> dict[str, Any]:
    """One structured line: `accelerators active=[...] failed={...} pure_python_forced=...`; a warning when the
    broker runs without any (no compiler at install time, or TIDELOG_PURE_PYTHON)."""
    found = status()
    log = logger.info if found["active"] and not found["failed"] else logger.warning
    log("accelerators", **found)
    return found


def declared_extensions(setup_py: Path) -> list[str]:
    """The module names of the `Extension("dotted.name", ...)` calls in setup.py (read, not run)."""
    import ast  # only for the wheel and image checks

    names = []
    for node in ast.walk(ast.parse(Path(setup_py).read_text(), str(setup_py))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Extension":
            first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "name"), None)
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.append(first.value)
    return sorted(names)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    found = status()
    print(json.dumps(found, indent=2))
    if args[:1] == ["--check"] and len(args) == 2:
        missing = sorted(set(declared_extensions(Path(args[1]))) - set(found["active"]))
        if missing:
            print(f"accelerators declared in {args[1]} but not active: {', '.join(missing)}", file=sys.stderr)
            return 1
    elif args:
        print("usage: python -m tidelog.accelerators [--check SETUP_PY]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
