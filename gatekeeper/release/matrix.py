"""The version matrix: torch (and channel) x ROCm version and GPU arch, each cell the
latest recorded verdict, plus what cannot be measured (EOL dates, known CVEs) from a
hand-kept ``matrix.yaml`` (read by ``gatekeeper.release.releases``)."""

from __future__ import annotations

import datetime as dt
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gatekeeper.contract.stage_names import STAGE_NAMES
from gatekeeper.contract.stage_report import StageReport
from gatekeeper.history import BaselineStore, RunInfo, history_noting
from gatekeeper.release.releases import Arch, Lifecycle, MatrixFile, Release, lifecycle, version_key

__all__ = [
    "Cell",
    "Column",
    "Matrix",
    "Row",
    "build_matrix",
    "releases_shown",
]

STAGES = STAGE_NAMES  # pipeline order


@dataclass(frozen=True)
class Row:
    torch: str
    channel: str
    life: Lifecycle


@dataclass(frozen=True)
class Column:
    platform: str  # "ROCm 6.2.4", "CUDA 12.4" or "CPU"
    arch: str
    life: Lifecycle  # of the ROCm release
    arch_eol: Arch | None = None
    arch_past_eol: bool = False

    @property
    def label(self) -> str:
        return f"{self.platform} · {self.arch}"


@dataclass(frozen=True)
class Cell:
    verdict: str  # pass | warn | blocked, or passed/failed (stage statuses when no verdict was recorded)
    date: str
    pipeline_id: str | None
    commit: str | None
    link: str | None
    from_verdict: bool = True


@dataclass(frozen=True)
class Matrix:
    rows: tuple[Row, ...]
    columns: tuple[Column, ...]
    cells: Mapping[tuple[int, int], Cell]
    today: dt.date
    spec: MatrixFile
    notes: tuple[str, ...] = field(default=())


# ------------------------------------------------------------------ history -> matrix


@dataclass(frozen=True)
class _Run:
    info: RunInfo
    report: StageReport
    verdict: str | None
    statuses: tuple[str, ...]


def _runs(store: BaselineStore, limit: int, notes: list[str]) -> list[_Run]:
    """One entry per recorded pipeline (its stages grouped by pipeline id, else commit and time); the records the
    store left out go into ``notes``."""
    grouped: dict[tuple[str, ...], list[tuple[RunInfo, StageReport]]] = {}
    for stage in STAGES:
        for info, report in history_noting(store, stage, notes, limit=limit):
            key = (
                ("p", info.pipeline_id)
                if info.pipeline_id
                else ("c", info.commit or "", (info.recorded_at or report.started_at)[:16])
            )
            grouped.setdefault(key, []).append((info, report))
    out = []
    for entries in grouped.values():
        info, report = entries[0]
        verdict = next((i.verdict for i, _ in entries if i.verdict), None)
        out.append(_Run(info, report, verdict, tuple(r.status for _, r in entries)))
    return out


def _platform(report: StageReport) -> str:
    env = report.environment
    if env.device_kind == "rocm":
        return f"ROCm {env.rocm_version or '?'}"
    if env.device_kind == "cuda":
        return f"CUDA {env.cuda_version or '?'}"
    return "CPU"


def _link(template: str | None, info: RunInfo) -> str | None:
    if not template:
        return None
    values = {"pipeline_id": info.pipeline_id, "commit": info.commit, "ref": info.ref}
    needed = re.findall(r"{(\w+)}", template)
    if any(not values.get(n) for n in needed):
        return None
    # Each value is one path segment or query value, URL-quoted whole (2026-12-04 audit, second pass): a recorded
    # ref "x/../../admin?token=#" walked out of the pipelines page and set the query; the pages keep
    # escape.html_url / md_url on the result, so only an http(s) link is ever one.
    return template.format(**{k: urllib.parse.quote(str(v or ""), safe="") for k, v in values.items()})


def build_matrix(runs_store: BaselineStore | None, spec: MatrixFile, *, today: dt.date, limit: int = 1000) -> Matrix:
    notes: list[str] = []
    runs = _runs(runs_store, limit, notes) if runs_store is not None else []
    if runs_store is None:
        notes.append("no --history store given: the matrix shows only the releases of the matrix file")
    elif not runs:
        notes.append("the history store has no recorded runs yet")
    if spec.path is None:
        notes.append("no matrix.yaml: no EOL dates or CVEs (pass --matrix-file)")
    row_keys: dict[tuple[str, str], Row] = {}
    col_keys: dict[tuple[str, str], Column] = {}
    latest: dict[tuple[tuple[str, str], tuple[str, str]], tuple[str, _Run]] = {}
    for run in runs:
        env = run.report.environment
        rk = (env.torch_version or "?", env.channel)
        ck = (_platform(run.report), env.arch or "?")
        if rk not in row_keys:
            row_keys[rk] = Row(rk[0], rk[1], lifecycle(env.torch_version, spec.torch, today, spec.eol_warning_days))
        if ck not in col_keys:
            col_keys[ck] = _column(ck, env.rocm_version if env.device_kind == "rocm" else None, spec, today)
        when = run.info.recorded_at or run.report.started_at
        if (rk, ck) not in latest or when > latest[(rk, ck)][0]:
            latest[(rk, ck)] = (when, run)
    rows = sorted(row_keys.values(), key=lambda r: (version_key(r.torch), r.channel == "stable"), reverse=True)
    columns = sorted(
        col_keys.values(), key=lambda c: (c.platform.split()[0], version_key(c.platform.split()[-1]), c.arch)
    )
    columns.reverse()
    cells: dict[tuple[int, int], Cell] = {}
    for i, row in enumerate(rows):
        for j, col in enumerate(columns):
            found = latest.get(((row.torch, row.channel), (col.platform, col.arch)))
            if found:
                cells[(i, j)] = _cell(found[0], found[1], spec)
    return Matrix(tuple(rows), tuple(columns), cells, today, spec, tuple(notes))


def _column(key: tuple[str, str], rocm: str | None, spec: MatrixFile, today: dt.date) -> Column:
    arch = next((a for a in spec.archs if a.name == key[1]), None)
    life = lifecycle(rocm, spec.rocm, today, spec.eol_warning_days) if rocm else Lifecycle(None)
    return Column(key[0], key[1], life, arch, bool(arch and arch.eol and arch.eol < today))


def _cell(when: str, run: _Run, spec: MatrixFile) -> Cell:
    if run.verdict:
        verdict, from_verdict = run.verdict, True
    else:
        verdict = "failed" if any(s in ("failed", "error") for s in run.statuses) else "passed"
        from_verdict = False
    return Cell(
        verdict, when[:10], run.info.pipeline_id, run.info.commit, _link(spec.report_url, run.info), from_verdict
    )


def releases_shown(matrix: Matrix) -> Iterable[tuple[str, Release]]:
    """Every release line of matrix.yaml, torch first, for the lifecycle table."""
    for kind, releases in (("torch", matrix.spec.torch), ("ROCm", matrix.spec.rocm)):
        for r in sorted(releases, key=lambda r: version_key(r.version), reverse=True):
            yield kind, r
