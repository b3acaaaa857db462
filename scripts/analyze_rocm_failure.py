#!/usr/bin/env python3
"""CI entry: diagnose a failed ROCm job (same options as ``gatekeeper analyze``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from gatekeeper.cli import main

if __name__ == "__main__":
    sys.exit(main(["analyze", *sys.argv[1:]]))
