"""``--cases FILE.py``: every top-level ``case_*(device)`` function in a team's file is
a check. The parent finds them by parsing the file (importing it could crash the
stage); the worker imports and calls them, so a case that segfaults, aborts or
hangs costs that case only."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from typing import Any

from gatekeeper.core.errors import InputError

__all__ = ["discover", "run_user_case"]

_MODULES: dict[str, Any] = {}


def discover(path: Path) -> list[str]:
    """Names of the top-level ``case_*`` functions in ``path``, in file order."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(
            path, "", f"cannot read: {err.strerror or err}", "pass an existing .py file to --cases"
        ) from None
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as err:
        raise InputError(path, f"{err.lineno}:{err.offset}", f"syntax error: {err.msg}", "fix the file") from None
    names = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("case_")
    ]
    if not names:
        raise InputError(path, "", "no top-level function named case_*", "define e.g. def case_my_layer(device): ...")
    return names


def _load(path: str) -> Any:
    resolved = str(Path(path).resolve())
    if resolved not in _MODULES:
        name = f"gatekeeper_user_cases_{len(_MODULES)}"
        spec = importlib.util.spec_from_file_location(name, resolved)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {resolved}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _MODULES[resolved] = module
    return _MODULES[resolved]


def run_user_case(path: str, name: str, device: str) -> str:
    """Call ``name(torch.device(device))`` from ``path``; what it returns (if a string) is the message."""
    import torch

    value = getattr(_load(path), name)(torch.device(device))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return value if isinstance(value, str) else ""
