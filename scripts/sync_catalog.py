"""Publish the CI/CD catalog copy: templates/gatekeeper.yml from ci-templates/gatekeeper.yml.

A CI/CD catalog project needs its components under templates/; ci-templates/ is the source.
Run after editing the component: ``python scripts/sync_catalog.py`` (``--check`` exits 1 when
the copy is stale; tests/test_ci_templates.py checks the same).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAIRS = [(ROOT / "ci-templates" / "gatekeeper.yml", ROOT / "templates" / "gatekeeper.yml")]


def main(argv: list[str]) -> int:
    stale = [dst for src, dst in PAIRS if not dst.exists() or dst.read_bytes() != src.read_bytes()]
    if "--check" in argv:
        for dst in stale:
            print(f"{dst.relative_to(ROOT)} differs from ci-templates/: run python scripts/sync_catalog.py")
        return 1 if stale else 0
    for src, dst in PAIRS:
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(src.read_bytes())
        print(f"{dst.relative_to(ROOT)} <- {src.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
