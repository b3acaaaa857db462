"""Refuse a release whose tag, package version and component version disagree.

The tag pipeline runs ``python scripts/release_check.py --tag "$CI_COMMIT_TAG"`` before
anything is built: the tag must be the package version (``gatekeeper/__init__.py``,
a plain semantic version as the CI/CD catalog wants), the component's ``version`` input
(``ci-templates/gatekeeper.yml``) must default to it, and the catalog copy
(``templates/``) must be in sync. So component X always installs gatekeeper X.
Exit 0 when all agree, 1 naming each disagreement, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.sync_catalog import CatalogError, catalog_text  # noqa: E402

SEMVER = re.compile(r"^\d+\.\d+\.\d+$")


def package_version(root: Path = ROOT) -> str:
    m = re.search(r'^__version__ = "([^"]+)"$', (root / "gatekeeper" / "__init__.py").read_text(), re.MULTILINE)
    if not m:
        raise SystemExit("release_check: gatekeeper/__init__.py has no __version__ line")
    return m.group(1)


def component_version(path: Path) -> str | None:
    header = path.read_text(encoding="utf-8").partition("\n---\n")[0]
    spec = (yaml.safe_load(header) or {}).get("spec") or {}
    default = ((spec.get("inputs") or {}).get("version") or {}).get("default")
    return None if default is None else str(default)


def problems(tag: str, root: Path = ROOT) -> list[str]:
    version = package_version(root)
    out = []
    if not SEMVER.match(tag):
        out.append(f"tag {tag!r} is not a plain semantic version X.Y.Z (the CI/CD catalog needs one)")
    if tag != version:
        out.append(f"tag {tag} is not the package version {version} (gatekeeper/__init__.py)")
    source = root / "ci-templates" / "gatekeeper.yml"
    stamped = component_version(source)
    if stamped != version:
        out.append(f"ci-templates/gatekeeper.yml input version defaults to {stamped}, not {version}: stamp it")
    catalog = root / "templates" / "gatekeeper.yml"
    try:
        if not catalog.exists() or catalog.read_text(encoding="utf-8") != catalog_text(source.read_text("utf-8")):
            out.append("templates/gatekeeper.yml is stale: run python scripts/sync_catalog.py")
    except CatalogError as err:
        out.append(str(err))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", required=True, help="the release tag, e.g. $CI_COMMIT_TAG")
    args = parser.parse_args(argv)
    found = problems(args.tag)
    for line in found:
        print(f"release_check: {line}", file=sys.stderr)
    if not found:
        print(f"release_check: tag, package and component agree on {args.tag}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
