"""Moving records between stores, and keeping them when a store cannot be reached.

``export_records``/``import_records``: a store's records (and the anchors set in it) to a JSON Lines file
and back, or straight from one store into another (``sqlite:`` to ``postgresql://`` when a team moves to a
shared database). An import checks every line before it writes one, and writes them in one transaction:
a file with a line that does not parse imports nothing and names the line.

``record``: what ``evaluate --record`` does. It tries the store, tries once more, and when the store
still cannot be reached it writes the run's records to a spool file (the same JSON Lines format) and
says how to import them later: nothing is lost.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gatekeeper.contract.stage_report import StageReport
from gatekeeper.core import budgets, files
from gatekeeper.core.errors import InputError
from gatekeeper.core.redact import redact
from gatekeeper.history import Opening, open_store
from gatekeeper.history.baseline import BaselineStore, RunInfo, unusable
from gatekeeper.history.sql import SqlStore

__all__ = ["RECORD_SCHEMA", "Transfer", "export_records", "import_records", "read_records", "record", "store_name"]

RECORD_SCHEMA = "gatekeeper.history-record/v1"
ANCHOR_SCHEMA = "gatekeeper.history-anchor/v1"
_MAX_LINE = 64 * 1024 * 1024  # one stage report with every sample of a long soak


@dataclass(frozen=True)
class Transfer:
    records: int
    anchors: int
    skipped: tuple[str, ...] = ()


def store_name(spec: str) -> str:
    """The spec as messages may show it (a password in a URL replaced by ***)."""
    from gatekeeper.history.postgres import redact_url

    return redact_url(spec)


def _line(info: RunInfo, report: StageReport) -> str:
    record = {k: v for k, v in info.to_dict().items() if k != "run_id" and v is not None}
    return json.dumps({"schema": RECORD_SCHEMA, "info": record, "report": report.to_dict()}, sort_keys=True)


def export_records(spec: str, out: Path) -> Transfer:
    """Every record of ``spec`` (oldest first) and every anchor set in it, as JSON Lines in ``out``."""
    store = open_store(spec)
    if not isinstance(store, SqlStore):
        raise InputError(
            None, "--history", f"{store_name(spec)} cannot be exported", "export a sqlite: or postgresql: store"
        )
    pipelines: dict[str, str | None] = {}
    lines = []
    for info, report in store.records():
        lines.append(_line(info, report))
        pipelines[info.run_id or ""] = info.pipeline_id
    anchors = 0
    skipped = list(getattr(store, "skipped", ()))
    for mark in reversed(store.anchors()):
        run = pipelines.get(mark.run, mark.run) if ":" in mark.run else mark.run
        if run is None:
            skipped.append(
                f"anchor {mark.run} (set by {mark.set_by}) names a record without a pipeline id: not exported"
            )
            continue
        doc = {**mark.to_dict(), "run": run, "schema": ANCHOR_SCHEMA}
        doc.pop("id", None)
        lines.append(json.dumps(doc, sort_keys=True))
        anchors += 1
    files.atomic_write(out, "".join(line + "\n" for line in lines))
    return Transfer(len(lines) - anchors, anchors, tuple(skipped))


def read_records(
    path: Path, *, project: str | None = None
) -> tuple[list[tuple[StageReport, RunInfo]], list[dict[str, Any]]]:
    """The records and anchors of an export or spool file; the first line that does not parse is an input
    error naming it (nothing is returned, so nothing is half imported). ``project``: the job's repository
    (``CI_PROJECT_PATH``); a record that says it belongs to another is refused, never filed under it."""
    if not Path(path).is_file():
        raise InputError(
            path, "", "no such export or spool file", "pass a file 'gatekeeper history export' or a spool wrote"
        )
    records: list[tuple[StageReport, RunInfo]] = []
    anchors: list[dict[str, Any]] = []
    now = dt.datetime.now(dt.timezone.utc)
    # budgets.open_regular: the is_file() above is a check, not a guarantee (a FIFO swapped in after it blocks open())
    with budgets.open_regular(path, what="export or spool file") as fh:
        for number, text in enumerate(_lines(fh, path), start=1):
            if not text.strip():
                continue
            doc = _parse_line(text, path, number)
            if doc.get("schema") == ANCHOR_SCHEMA:
                anchors.append(_anchor(doc, path, number, now))
            else:
                records.append(_record(doc, path, number, project, now))
    return records, anchors


def _claimed_time(value: object, path: Path | str, where: str, now: dt.datetime) -> str:
    """A time a record or anchor says of itself, as the store writes its own (aware UTC, to the second), and
    never later than the importing job's clock (``budgets.aware_utc``'s ``not_after``).

    Stores order by this text (the newest record is the baseline, the newest anchor the anchor): a line that
    claimed ``9999-12-31``, or ``z``, or ``23:59+14:00`` (earlier in UTC, later as text), was every later run's
    baseline or anchor, whatever was recorded or set after it (docs/security.md, "Findings of the 2026-12-04
    audit").
    """
    hint = "fix or remove that line (export writes the time each record was recorded)"
    when = budgets.aware_utc(value, path=path, where=where, hint=hint, not_after=now)
    return when.isoformat(timespec="seconds")


def _lines(fh: Any, path: Path) -> Iterator[bytes]:
    number = 0
    while True:
        text = fh.readline(_MAX_LINE + 1)
        if not text:
            return
        number += 1
        if len(text) > _MAX_LINE:
            raise InputError(path, f"line {number}", f"longer than {_MAX_LINE} bytes", "is this an export file?")
        yield text


def _parse_line(text: bytes, path: Path, number: int) -> dict[str, Any]:
    try:  # the strict reader of every JSON input: UTF-8, no duplicate key, bounded numbers and depth
        doc = files.parse_json(text, path, what="record")
    except InputError as err:
        # the position in the line ("1:37": column 37; "2:1": past its last character), so that json's
        # "Invalid control character at" says where
        row, _, column = err.where.partition(":")
        at = f", column {column}" if row == "1" and column else ", at its end" if column else ""
        place = f"line {number}{at}"
        raise InputError(
            path, place, f"not a JSON record: {err.problem}", "fix or remove that line, then import again"
        ) from None
    if not isinstance(doc, dict):
        raise InputError(path, f"line {number}", "a record must be a JSON object", "fix or remove that line")
    schema = doc.get("schema")
    if (
        isinstance(schema, str)
        and schema.startswith("gatekeeper.history-")
        and schema not in (RECORD_SCHEMA, ANCHOR_SCHEMA)
    ):
        raise InputError(
            path, f"line {number}", f"written by a newer gatekeeper ({schema})", "upgrade gatekeeper to import it"
        )
    if schema not in (RECORD_SCHEMA, ANCHOR_SCHEMA):
        raise InputError(
            path, f"line {number}", f"not a {RECORD_SCHEMA} line", "pass a file 'gatekeeper history export' wrote"
        )
    return doc


def _record(
    doc: Mapping[str, Any], path: Path, number: int, project: str | None, now: dt.datetime
) -> tuple[StageReport, RunInfo]:
    info_doc = doc.get("info")
    problem = unusable(doc.get("report")) or ("no info object" if not isinstance(info_doc, dict) else None)
    if problem:
        raise InputError(path, f"line {number}", f"not a usable record: {problem}", "fix or remove that line")
    assert isinstance(info_doc, dict)  # narrowed above  # nosec B101
    fields = {k: v for k, v in info_doc.items() if k in RunInfo.__dataclass_fields__ and k != "run_id"}
    stack = fields.get("stack")
    bad = [k for k, v in fields.items() if k != "stack" and not isinstance(v, str | None)]
    if stack is not None and not (isinstance(stack, dict) and all(isinstance(v, str | None) for v in stack.values())):
        bad.append("stack")
    if bad:
        what = f"info.{bad[0]} is not {'an object of strings' if bad[0] == 'stack' else 'a string'}"
        raise InputError(path, f"line {number}", f"not a usable record: {what}", "fix or remove that line")
    fields["recorded_at"] = _claimed_time(fields.get("recorded_at"), path, f"line {number}: info.recorded_at", now)
    try:
        record = StageReport.from_dict(doc["report"]), RunInfo(**fields)
    except (TypeError, KeyError, ValueError, AttributeError) as err:
        raise InputError(path, f"line {number}", f"not a usable record: {err}", "fix or remove that line") from None
    claimed = (record[1].stack or {}).get("project")
    if project and claimed and claimed != project:  # docs/security.md, principle 1: never filed under another
        raise InputError(
            path, f"line {number}", f"a record of project {claimed!r}, this job is in project {project!r}",
            "import a project's records in that project's job (or outside CI, where no project is set)",
        )  # fmt: skip
    return record


def _anchor(doc: Mapping[str, Any], path: Path, number: int, now: dt.datetime) -> dict[str, Any]:
    needed = ("run", "set_by", "reason", "set_at")
    if not all(isinstance(doc.get(k), str) and doc.get(k) for k in needed):
        raise InputError(path, f"line {number}", f"an anchor needs {', '.join(needed)}", "fix or remove that line")
    return {**{k: doc[k] for k in needed}, "set_at": _claimed_time(doc["set_at"], path, f"line {number}: set_at", now)}


def import_records(source: str, into: str) -> Transfer:
    """Records (and anchors) from an export/spool file or another store into the store ``into``."""
    if Path(source).is_file() or source.endswith(".jsonl"):
        records, anchors = read_records(Path(source), project=Opening().project)
        skipped: list[str] = []
    else:
        src = open_store(source)
        if not isinstance(src, SqlStore):
            raise InputError(
                None,
                "--from",
                f"{store_name(source)} cannot be exported",
                "import from a sqlite: or postgresql: store or a file",
            )
        now = dt.datetime.now(dt.timezone.utc)
        records = [(report, info) for info, report in src.records()]
        pipelines = {info.run_id: info.pipeline_id for report, info in records}
        records = [
            (
                report,
                _portable(
                    replace(
                        info,
                        recorded_at=_claimed_time(info.recorded_at, source, f"record {info.run_id}: recorded_at", now),
                    )
                ),
            )
            for report, info in records
        ]
        anchors = []
        skipped = list(getattr(src, "skipped", ()))
        for mark in reversed(src.anchors()):
            run = pipelines.get(mark.run, mark.run) if ":" in mark.run else mark.run
            if run:
                set_at = _claimed_time(mark.set_at, source, f"anchor of run {run}: set_at", now)
                anchors.append({"run": run, "set_by": mark.set_by, "reason": mark.reason, "set_at": set_at})
    dst = open_store(into, create=True)
    if not isinstance(dst, SqlStore):
        raise InputError(
            None, "--into", f"{store_name(into)} cannot take an import", "import into a sqlite: or postgresql: store"
        )
    written = dst.save_many(records)
    for anchor in anchors:
        dst.set_anchor(anchor["run"], by=anchor["set_by"], reason=anchor["reason"], at=anchor["set_at"])
    return Transfer(written, len(anchors), tuple(skipped))


def _portable(info: RunInfo) -> RunInfo:
    return replace(info, run_id=None)


def record(
    spec: str,
    records: Sequence[tuple[StageReport, RunInfo]],
    *,
    spool: Path,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Save ``records`` into ``spec``; on failure try once more, then spool them to ``spool`` and raise an
    input error that names the store, the spool file and the import that recovers them."""
    problem = ""
    for _attempt in range(2):
        try:
            store = open_store(spec, environ, create=True)
            _save_all(store, records)
            return
        except InputError as err:
            problem = err.line()
    spool = _spool("".join(_line(info, report) + "\n" for report, info in records), spool)
    raise InputError(
        store_name(spec),
        "",
        f"could not record this run (tried twice: {problem}); its {len(records)} records are spooled in {spool}",
        f"once the store is back: gatekeeper history import --from {spool} --into {store_name(spec)}",
    )


def _spool(lines: str, spool: Path) -> Path:
    """Write ``lines`` to ``spool`` (whole or not at all), or beside it when that name is taken; where they went.

    The spool lies beside the verdict, where stage jobs write, and ``history import`` later believes every line
    of the file it is given (each a record that claims its own verdict, metrics, pipeline and time). So this
    run's records never join a file that was there before, whatever it is: a regular file (before, its lines
    were kept and imported with ours: a stage job's planted record became a baseline), a link (its target
    could be any file of this machine), a directory or a FIFO. That file is left as it is, and the records go to
    a new file beside it, named in the error: never lost, never mixed (docs/security.md, 2026-12-04 audit).
    """
    spool.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(spool):
        fd, name = tempfile.mkstemp(prefix=f"{spool.stem}-", suffix=spool.suffix, dir=spool.parent)
        os.close(fd)
        spool = Path(name)
    files.atomic_write(spool, redact(lines), redacted=True)
    return spool


def _save_all(store: BaselineStore, records: Iterable[tuple[StageReport, RunInfo]]) -> None:
    if isinstance(store, SqlStore):
        store.save_many(records)
        return
    for report, info in records:
        store.save(report, info)
