"""Dependencies: ``pip check``, the installed versions of the libraries that
decide compatibility, the downstream tools a team declares, and the nightly
guard (the field report's hard exclusion: nightly torch is not validated
against onnxruntime or TensorRT)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from importlib import metadata

from gatekeeper.core import proc
from gatekeeper.core.errors import InputError

__all__ = [
    "NIGHTLY_EXCLUDED",
    "TOOLS",
    "DownstreamStatus",
    "check_downstream",
    "installed_versions",
    "nightly_guard",
    "parse_downstream",
    "parse_pip_check",
    "pip_check",
]

# tool -> (distributions that provide it, the module to import)
TOOLS: dict[str, tuple[tuple[str, ...], str]] = {
    "torch": (("torch",), "torch"),
    "torchvision": (("torchvision",), "torchvision"),
    "onnx": (("onnx",), "onnx"),
    "onnxruntime": (
        ("onnxruntime", "onnxruntime-gpu", "onnxruntime-rocm", "onnxruntime-migraphx", "onnxruntime-training"),
        "onnxruntime",
    ),
    "triton": (("triton", "pytorch-triton-rocm", "pytorch-triton", "triton-rocm"), "triton"),
    "tensorrt": (("tensorrt", "tensorrt-cu12", "tensorrt-cu13", "tensorrt-cu11", "tensorrt-libs"), "tensorrt"),
}
REPORTED = ("torch", "torchvision", "onnx", "onnxruntime", "triton")
NIGHTLY_EXCLUDED = ("onnxruntime", "tensorrt")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def parse_downstream(text: str | None) -> tuple[str, ...]:
    """``onnxruntime,tensorrt`` -> ('onnxruntime', 'tensorrt'); InputError on a name pip could not have."""
    names = []
    for raw in (text or "").split(","):
        name = raw.strip().lower()
        if not name:
            continue
        if not _NAME.fullmatch(name):
            raise InputError(
                None, "--downstream", f"{raw.strip()!r} is not a package name", "e.g. onnxruntime,tensorrt"
            )
        if name not in names:
            names.append(name)
    return tuple(names)


def _distributions(tool: str) -> tuple[tuple[str, ...], str]:
    return TOOLS.get(tool, ((tool,), tool.replace("-", "_")))


def installed_version(tool: str) -> tuple[str, str] | None:
    """(distribution, version) of the first installed distribution that provides ``tool``."""
    for dist in _distributions(tool)[0]:
        try:
            return dist, metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def installed_versions(tools: tuple[str, ...] = REPORTED) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for tool in tools:
        found = installed_version(tool)
        out[tool] = f"{found[1]}" + (f" ({found[0]})" if found[0] != tool else "") if found else None
    return out


def parse_pip_check(stdout: str) -> list[str]:
    """The problems ``pip check`` printed, one per line ('No broken requirements found.' means none)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    return [ln for ln in lines if not ln.lower().startswith("no broken requirements")]


def pip_check(timeout: float = 120.0) -> tuple[list[str] | None, str]:
    """(problems, note): problems is None when pip check could not run (the note says why)."""
    res = proc.run([sys.executable, "-m", "pip", "check"], timeout=timeout)
    if res.timed_out or res.returncode is None:
        return None, f"pip check {res.describe()}"
    if "No module named pip" in res.stderr:
        return None, "pip is not installed in this environment"
    problems = parse_pip_check(res.stdout)
    if res.returncode != 0 and not problems:
        return None, f"pip check {res.describe()}: {(res.stderr.strip().splitlines() or [''])[-1]}"
    return problems, ""


@dataclass(frozen=True)
class DownstreamStatus:
    tool: str
    ok: bool
    message: str


def check_downstream(tool: str, pip_problems: list[str], timeout: float = 120.0) -> DownstreamStatus:
    """A declared downstream tool must be installed, import cleanly, and have no ``pip check`` complaint."""
    dists, module = _distributions(tool)
    found = installed_version(tool)
    if found is None:
        return DownstreamStatus(
            tool, False, f"declared downstream {tool} is not installed (none of {', '.join(dists)})"
        )
    dist, version = found
    # A fresh interpreter: an import that aborts on an ABI mismatch must not take the stage down.
    code = f"import {module} as m; print(getattr(m, '__version__', ''))"
    res = proc.run([sys.executable, "-c", code], timeout=timeout)
    if not res.ok:
        last = (res.stderr.strip().splitlines() or [""])[-1][:300]
        return DownstreamStatus(
            tool, False, f"{dist} {version} is installed but import {module} {res.describe()}: {last}"
        )
    dist_key = re.sub(r"[-_.]+", "-", dist.lower())
    related = [p for p in pip_problems if dist_key in re.sub(r"[-_.]+", "-", p.lower())]
    if related:
        return DownstreamStatus(tool, False, f"{dist} {version} is incompatible: {'; '.join(related)}")
    return DownstreamStatus(tool, True, f"{dist} {version} imports cleanly")


def nightly_guard(channel: str, downstream: tuple[str, ...]) -> list[str]:
    """The downstream tools a nightly torch must not ship to (empty on stable)."""
    if channel != "nightly":
        return []
    return [t for t in downstream if t in NIGHTLY_EXCLUDED]
