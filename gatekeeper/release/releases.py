"""matrix.yaml: the release lines of torch and ROCm, and GPU architectures, with what
cannot be measured: release and EOL dates, known CVEs (schema ``gatekeeper.matrix/v1``)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatekeeper.contract import schemas
from gatekeeper.core import files

__all__ = [
    "MATRIX_SCHEMA",
    "Arch",
    "Cve",
    "Lifecycle",
    "MatrixFile",
    "Release",
    "find_release",
    "lifecycle",
    "load_matrix_file",
    "version_key",
]

MATRIX_SCHEMA = "gatekeeper.matrix/v1"


@dataclass(frozen=True)
class Cve:
    id: str
    summary: str
    fixed_in: str | None = None
    url: str | None = None


@dataclass(frozen=True)
class Release:
    version: str
    released: dt.date | None = None
    eol: dt.date | None = None
    notes: str = ""
    cves: tuple[Cve, ...] = ()


@dataclass(frozen=True)
class Arch:
    name: str
    gpus: str = ""
    eol: dt.date | None = None
    notes: str = ""


@dataclass(frozen=True)
class MatrixFile:
    path: str | None = None
    report_url: str | None = None
    eol_warning_days: int = 90
    torch: tuple[Release, ...] = ()
    rocm: tuple[Release, ...] = ()
    archs: tuple[Arch, ...] = ()


@dataclass(frozen=True)
class Lifecycle:
    """What matrix.yaml says about one version: its release line, EOL state and open CVEs."""

    release: Release | None
    past_eol: bool = False
    eol_soon: bool = False
    cves: tuple[Cve, ...] = ()

    def flags(self) -> list[str]:
        out = []
        if self.release and self.release.eol:
            if self.past_eol:
                out.append(f"past EOL since {self.release.eol}")
            elif self.eol_soon:
                out.append(f"EOL on {self.release.eol}")
        out += [c.id for c in self.cves]
        return out


def load_matrix_file(path: str | Path) -> MatrixFile:
    doc = files.read_yaml(path, what="matrix file")
    data = files.dates_to_text(doc.data)
    schemas.validate(MATRIX_SCHEMA, data, path=str(path), position=doc.position)
    date = _date
    return MatrixFile(
        path=str(path),
        report_url=data.get("report_url"),
        eol_warning_days=data.get("eol_warning_days", 90),
        torch=tuple(_release(r) for r in data.get("torch", ())),
        rocm=tuple(_release(r) for r in data.get("rocm", ())),
        archs=tuple(
            Arch(a["name"], a.get("gpus", ""), date(a.get("eol")), a.get("notes", "")) for a in data.get("gpu_arch", ())
        ),
    )


def _date(text: str | None) -> dt.date | None:
    return dt.date.fromisoformat(text) if text else None


def _release(r: Mapping[str, Any]) -> Release:
    cves = tuple(Cve(c["id"], c["summary"], c.get("fixed_in"), c.get("url")) for c in r.get("cves", ()))
    return Release(r["version"], _date(r.get("released")), _date(r.get("eol")), r.get("notes", ""), cves)


def version_key(version: str) -> tuple[int, ...]:
    """Numeric release components: '2.6.0.dev20241201+rocm6.2' -> (2, 6, 0)."""
    head = re.split(r"[+]", version, maxsplit=1)[0]
    out = []
    for part in head.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def find_release(version: str | None, releases: Sequence[Release]) -> Release | None:
    """The release line ``version`` belongs to: the longest matching version prefix."""
    if not version:
        return None
    key = version_key(version)
    best = None
    for r in releases:
        rk = version_key(r.version)
        if rk and key[: len(rk)] == rk and (best is None or len(rk) > len(version_key(best.version))):
            best = r
    return best


def lifecycle(version: str | None, releases: Sequence[Release], today: dt.date, warn_days: int) -> Lifecycle:
    release = find_release(version, releases)
    if release is None:
        return Lifecycle(None)
    key = version_key(version or "")
    cves = tuple(c for c in release.cves if not c.fixed_in or key < version_key(c.fixed_in))
    eol = release.eol
    past = eol is not None and eol < today
    soon = eol is not None and not past and (eol - today).days <= warn_days
    return Lifecycle(release, past, soon, cves)
