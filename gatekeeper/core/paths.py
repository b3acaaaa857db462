"""Where gatekeeper keeps state between runs on one runner.

One root (``GATEKEEPER_CACHE_DIR``, default ``.gatekeeper-cache`` in the working directory)
holds the compiled-kernel caches (``kernel_cache``) and the circuit breakers' state
(``breaker``), so a CI cache of that one directory keeps both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["DEFAULT_ROOT", "cache_root"]

DEFAULT_ROOT = ".gatekeeper-cache"


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("GATEKEEPER_CACHE_DIR") or DEFAULT_ROOT).resolve()
