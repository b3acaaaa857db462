"""The compiled-kernel cache: one root directory, and the variables that point
compilers and libraries into it (inductor, Triton, torch extensions, MIOpen,
the HIP and CUDA JIT caches). In CI the root lies inside $CI_PROJECT_DIR so
GitLab's cache: can keep it."""

from __future__ import annotations

import json
import os
import platform
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gatekeeper.core import budgets
from gatekeeper.core.digest import sha256
from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import shell
from gatekeeper.core.paths import cache_root

__all__ = [
    "CACHE_VARIABLES",
    "cache_env",
    "cache_fingerprint",
    "cache_key",
    "export_lines",
    "link_inductor_headers",
]

# variable -> subdirectory of the cache root
CACHE_VARIABLES: dict[str, str] = {
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
    "MIOPEN_USER_DB_PATH": "miopen/db",
    "MIOPEN_CUSTOM_CACHE_DIR": "miopen/cache",
    "CUDA_CACHE_PATH": "cuda_jit",
    # ROCm's code-object cache: comgr reads AMD_COMGR_CACHE_DIR (default
    # $XDG_CACHE_HOME/comgr_cache, outside the project), per its comgr-env.h.
    "AMD_COMGR_CACHE_DIR": "comgr",
    # No reader of HIP_CACHE_PATH was found in ROCm's sources (docs/ci.md); kept, harmless.
    "HIP_CACHE_PATH": "hip_jit",
}


def cache_env(root: str | Path | None = None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The cache variables under ``root``; variables already set in ``environ`` are kept."""
    env = os.environ if environ is None else environ
    base = Path(root).resolve() if root is not None else cache_root(env)
    return {var: env.get(var) or str(base / sub) for var, sub in CACHE_VARIABLES.items()}


def export_lines(variables: Mapping[str, str]) -> str:
    """``export VAR='value'`` lines for ``eval "$(gatekeeper cache env)"`` in a CI job."""
    return "".join(f"export {var}={shell(value)}\n" for var, value in variables.items())


_HEADER_BYTES = 1 << 20  # MIOpen's version.h is under 1 KiB

# ---------------------------------------------------------------- cache key


def _miopen_version(rocm_path: Path) -> str | None:
    """MIOpen's version from its installed header (no GPU and no library load needed)."""
    header = rocm_path / "include" / "miopen" / "version.h"
    try:  # bounded, and a regular file only: $ROCM_PATH is the job's, and /dev/zero there would never end
        text = budgets.read_capped(header, max_bytes=_HEADER_BYTES, what="MIOpen version header").decode(
            "utf-8", "replace"
        )
    except InputError:
        return None
    parts = [re.search(rf"#define\s+MIOPEN_VERSION_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts if m) or None


def _gpu_archs(environ: Mapping[str, str], torch_archs: list[str]) -> list[str]:
    # An explicit arch list wins (what the runner's GPUs are); otherwise the
    # archs the torch build was compiled for, which needs no GPU to read.
    for var in ("GATEKEEPER_GPU_ARCH", "PYTORCH_ROCM_ARCH", "TORCH_CUDA_ARCH_LIST"):
        if environ.get(var):
            return sorted(set(re.split(r"[;,\s]+", environ[var].strip())) - {""})
    return sorted(set(torch_archs))


def cache_fingerprint(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What compiled kernels depend on: Python, torch (version and git hash), HIP/CUDA, GPU archs, MIOpen."""
    env = os.environ if environ is None else environ
    import torch

    hip = getattr(torch.version, "hip", None)
    cuda = getattr(torch.version, "cuda", None)
    try:
        torch_archs = list(torch.cuda.get_arch_list()) if (hip or cuda) else []
    except (RuntimeError, AssertionError):
        torch_archs = []
    rocm_path = Path(env.get("ROCM_PATH") or "/opt/rocm")
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "hip": hip,
        "cuda": cuda,
        "gpu_archs": _gpu_archs(env, torch_archs),
        "miopen": _miopen_version(rocm_path) if hip else None,
        "machine": platform.machine(),
    }


def cache_key(fingerprint: Mapping[str, Any]) -> str:
    """A readable, filesystem-safe key: py3.11-torch2.13.0+cpu-<git>-cpu-<archs>-<hash of all fields>."""
    runtime = (
        f"hip{fingerprint['hip']}"
        if fingerprint.get("hip")
        else (f"cuda{fingerprint['cuda']}" if fingerprint.get("cuda") else "cpu")
    )
    git = (fingerprint.get("torch_git") or "nogit")[:8]
    archs = "_".join(fingerprint.get("gpu_archs") or []) or "noarch"
    digest = sha256(json.dumps(dict(fingerprint), sort_keys=True).encode()).hexdigest()[:12]
    raw = f"py{fingerprint['python']}-torch{fingerprint['torch']}-{git}-{runtime}-{archs}-{digest}"
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", raw)


# ---------------------------------------------------------------- inductor's precompiled headers

HEADERS_SUBDIR = "inductor_pch"


def _inductor_default_dir(tmpdir: str | None = None, user: str | None = None) -> Path:
    # Mirrors torch._inductor.runtime.cache_dir_utils.default_cache_dir().
    if user is None:
        import getpass  # only here: its terminal modules are not loaded by every command

        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = f"uid_{os.getuid()}"
    safe = re.sub(r'[\\/:*?"<>|]', "_", user)
    return Path(tmpdir or tempfile.gettempdir()) / f"torchinductor_{safe}"


def link_inductor_headers(root: str | Path, tmpdir: str | None = None, user: str | None = None) -> str:
    """Keep inductor's precompiled headers in the cache root.

    Inductor writes them (about 150 MB) to $TMPDIR/torchinductor_$USER/precompiled_headers
    whatever TORCHINDUCTOR_CACHE_DIR says, and rebuilds them in every fresh job even
    when every compiled graph comes from the cache (17 of 19.5 s of a warm first call
    here, benchmarks/README.md). A symlink from there into the root lets GitLab keep them.
    """
    target = Path(root).resolve() / HEADERS_SUBDIR
    link = _inductor_default_dir(tmpdir, user) / "precompiled_headers"
    target.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        if link.resolve() == target:
            return f"inductor headers already kept in {target}"
        link.unlink()
    elif link.exists():
        return f"inductor headers stay in {link} (a directory is already there)"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=True)
    return f"inductor headers kept in {target} (via {link})"
