"""The compiled-kernel cache: one root directory, and the variables that point
compilers and libraries into it (inductor, Triton, torch extensions, MIOpen,
the HIP and CUDA JIT caches). In CI the root lies inside $CI_PROJECT_DIR so
GitLab's cache: can keep it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CACHE_VARIABLES", "cache_env", "cache_root"]

DEFAULT_ROOT = ".gatekeeper-cache"

# variable -> subdirectory of the cache root
CACHE_VARIABLES: dict[str, str] = {
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
    "MIOPEN_USER_DB_PATH": "miopen/db",
    "MIOPEN_CUSTOM_CACHE_DIR": "miopen/cache",
    "CUDA_CACHE_PATH": "cuda_jit",
    "HIP_CACHE_PATH": "hip_jit",  # read by newer HIP runtimes for the code-object cache
}


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("GATEKEEPER_CACHE_DIR") or DEFAULT_ROOT).resolve()


def cache_env(root: str | Path | None = None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The cache variables under ``root``; variables already set in ``environ`` are kept."""
    env = os.environ if environ is None else environ
    base = Path(root).resolve() if root is not None else cache_root(env)
    return {var: env.get(var) or str(base / sub) for var, sub in CACHE_VARIABLES.items()}
