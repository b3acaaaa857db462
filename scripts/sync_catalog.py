"""Publish the CI/CD catalog copy: templates/gatekeeper.yml from ci-templates/gatekeeper.yml.

A CI/CD catalog project needs its components under templates/; ci-templates/ is the source.
The catalog copy differs in exactly two places: its ``spec:`` asks for the component
context (``component: [name, sha, version]``, GitLab 18.6+) and its jobs receive
``$[[ component.version ]]`` in ``GATEKEEPER_COMPONENT_VERSION``, so that a job refuses a
``version`` input other than the release it was included at. ci-templates/ cannot say
that: ``$[[ component.* ]]`` is refused in a file included with ``local:`` or ``project:``.

Run after editing the component: ``python scripts/sync_catalog.py`` (``--check`` exits 1 when
the copy is stale; tests/test_ci_templates.py checks the same).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAIRS = [(ROOT / "ci-templates" / "gatekeeper.yml", ROOT / "templates" / "gatekeeper.yml")]

# (text in ci-templates/, text in the catalog copy): each must occur exactly once.
EDITS = (
    ("spec:\n  inputs:\n", "spec:\n  component: [name, sha, version]\n  inputs:\n"),
    ('    GATEKEEPER_COMPONENT_VERSION: ""\n', '    GATEKEEPER_COMPONENT_VERSION: "$[[ component.version ]]"\n'),
)


class CatalogError(Exception):
    pass


def catalog_text(source: str) -> str:
    """The catalog copy of a ci-templates/ component."""
    text = source
    for old, new in EDITS:
        if text.count(old) != 1:
            raise CatalogError(f"ci-templates/gatekeeper.yml must contain {old.strip()!r} exactly once")
        text = text.replace(old, new)
    return text


def main(argv: list[str]) -> int:
    try:
        wanted = {dst: catalog_text(src.read_text(encoding="utf-8")) for src, dst in PAIRS}
    except CatalogError as err:
        print(f"sync_catalog: {err}", file=sys.stderr)
        return 2
    stale = [dst for dst, text in wanted.items() if not dst.exists() or dst.read_text(encoding="utf-8") != text]
    if "--check" in argv:
        for dst in stale:
            print(f"{dst.relative_to(ROOT)} differs from ci-templates/: run python scripts/sync_catalog.py")
        return 1 if stale else 0
    for src, dst in PAIRS:
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(wanted[dst], encoding="utf-8")
        print(f"{dst.relative_to(ROOT)} <- {src.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
