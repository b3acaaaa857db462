"""What the SQL stores (``sqlite:`` and ``postgresql:``) share: the records and the queries (the anchors in
``sql_anchors``, the bound on times rows claim in ``sql_clock``).

A subclass gives the connection (``_connect``), a write transaction (``_transaction``), its placeholder
style and its schema migrations; everything a record is, and every query, is written once here, so the
two stores keep the same records and pass the same contract tests (tests/history/test_store_contract.py).

Schema (version 2): ``results`` holds one row per stage result: the searchable columns, the stage report
as JSON, ``points`` (each metric's per-process medians, what change detection reads without parsing
reports), ``config`` (the run's configuration), ``stack`` (what the report does not say: gatekeeper's
version, the job's image) and ``tag`` (set for a release pipeline). ``anchors`` holds every anchor a
release manager set, with who and why; nothing else writes it.

``results_series`` (not versioned: an index of derived data that an older gatekeeper neither needs nor
sees, so a shared store can be written by old and new runners alike) holds, per record written by this
gatekeeper, what ``history changes`` reads: the stack, the configuration and each metric's summary
(``gatekeeper.history.points``). The first writer that knows it creates it; a store whose account may not
create tables simply goes without (the record is saved all the same), and a record without a row there
is read from ``results`` as before.
"""

from __future__ import annotations

import abc
import contextlib
import datetime as dt
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from gatekeeper.contract.stage_report import StageReport, environment_problem, utc_now
from gatekeeper.core.redact import redact_obj
from gatekeeper.history import sql_anchors
from gatekeeper.history.baseline import (
    BASELINE_VERDICTS,
    BaselineStore,
    RunInfo,
    clock_check,
    first_comparable,
    read_record,
)
from gatekeeper.history.sql_clock import believed
from gatekeeper.history.sql_schema import (
    COLUMNS,
    RECORD,
    SERIES,
    SERIES_SUMMARY,
    SERIES_TABLE,
    AnchorMark,
    SeriesRow,
    contradiction,
    json_cached,
    json_dict,
    metric_points,
)

__all__ = ["SCHEMA_VERSION", "SqlStore"]

SCHEMA_VERSION = 2
_SCAN = 500  # rows examined for a comparable baseline before giving up


class SqlStore(BaselineStore):
    """The queries of every SQL store. Subclasses set ``label`` and implement the four hooks below."""

    label = "sql"  # the spec prefix, used in run ids: sqlite:12
    placeholder = "?"
    # The repository (CI_PROJECT_PATH) a shared store is read for: its records, and those recorded without
    # one; None (outside CI) reads every record. A record keeps the project that recorded it.
    project: str | None = None
    why_missing = ""  # why the last latest_record() returned None
    skipped: list[str]  # records the last latest_record() could not use

    # -- hooks (each dialect's store implements them) ------------------------------------------------------
    @abc.abstractmethod
    def _connect(self) -> contextlib.AbstractContextManager[Any]:
        """A connection, closed on exit."""

    @abc.abstractmethod
    def _transaction(self, conn: Any) -> contextlib.AbstractContextManager[None]:
        """One write transaction on ``conn``: committed on exit, rolled back on an error."""

    @abc.abstractmethod
    def where(self) -> str:
        """The store as a user named it, for messages (never a password)."""

    @abc.abstractmethod
    def _insert_id(self, conn: Any, insert: str, row: Sequence[Any]) -> int:
        """Insert one ``results`` row; its id."""

    @abc.abstractmethod
    def _series_table(self, conn: Any, *, create: bool) -> bool:
        """Whether ``results_series`` exists; with ``create`` (inside a write transaction) make it first if
        this account may. Never fails a write."""

    # -- helpers -----------------------------------------------------------------------------------------
    def _sql(self, text: str) -> str:
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    def _rows(self, query: str, args: Sequence[Any], conn: Any = None) -> list[Sequence[Any]]:
        """The rows of one query, on ``conn`` (one read's queries share a connection) or a new connection."""
        if conn is not None:
            return list(conn.execute(self._sql(query), list(args)).fetchall())
        with self._connect() as new:
            return list(new.execute(self._sql(query), list(args)).fetchall())

    def _scope(self, conds: list[str], args: list[object]) -> None:
        if self.project:
            conds.append("(project IS NULL OR project = ?)")
            args.append(self.project)

    @staticmethod
    def _clock() -> dt.datetime:
        """The reading job's clock: a record's ``recorded_at`` (an anchor's ``set_at``) is believed up to it."""
        return dt.datetime.now(dt.timezone.utc)

    @staticmethod
    def _eq(column: str, value: object, args: list[object]) -> str:
        if value is None:
            return f"{column} IS NULL"
        args.append(value)
        return f"{column} = ?"

    # -- writing -----------------------------------------------------------------------------------------
    def save(self, report: StageReport, info: RunInfo) -> None:
        self.save_many([(report, info)])

    def save_many(self, records: Iterable[tuple[StageReport, RunInfo]]) -> int:
        """Insert every record in one transaction; returns how many."""
        from gatekeeper.history.points import encode_levels  # here: numpy only for a store that writes

        rows = [self._row(report, info) for report, info in records]
        if not rows:
            return 0
        marks = ", ".join("?" for _ in COLUMNS)
        insert = self._sql(f"INSERT INTO results ({', '.join(COLUMNS)}) VALUES ({marks})")  # noqa: S608 - constant column names and ? placeholders only  # nosec B608
        side = self._sql(f"INSERT INTO {SERIES_TABLE} (result_id, stack, config, names, data) VALUES (?, ?, ?, ?, ?)")  # noqa: S608 - constant names  # nosec B608
        with self._connect() as conn, self._transaction(conn):
            summaries = self._series_table(conn, create=True)
            for row in rows:
                if not summaries:
                    conn.execute(insert, row)
                    continue
                rid = self._insert_id(conn, insert, row)
                levels = encode_levels(json.loads(row[COLUMNS.index("points")]))
                if levels is not None:
                    conn.execute(side, [rid, row[COLUMNS.index("stack")], row[COLUMNS.index("config")], *levels])
        return len(rows)

    def _row(self, report: StageReport, info: RunInfo) -> tuple[Any, ...]:
        env = report.environment
        # A store is a file like any other: a secret in a stage's message (the code under test wrote it) or in an
        # imported line never reaches it (docs/security.md); every string is redacted as write_json does.
        doc = redact_obj(report.to_dict())
        stack = redact_obj(dict(info.stack or {}))
        ref, commit, pipeline, verdict, tag = redact_obj(
            [info.ref, info.commit, info.pipeline_id, info.verdict, info.tag]
        )
        # the columns too: a version string is the stage's to write (2026-12-04 audit: torch_version went in whole)
        arch, rocm, torch = redact_obj([env.arch, env.rocm_version, env.torch_version])
        project = stack.get("project") or self.project
        return (
            report.stage, report.status, env.channel, env.device_kind, arch, rocm, torch,
            doc["config"].get("model"), ref, commit, pipeline, verdict,
            info.recorded_at or utc_now(), json.dumps(doc["environment"], sort_keys=True), json.dumps(doc),
            tag, json.dumps(stack, sort_keys=True), json.dumps(redact_obj(metric_points(report))),
            json.dumps(doc["config"], sort_keys=True, default=str), project,
        )  # fmt: skip

    # -- baselines ---------------------------------------------------------------------------------------
    def latest_record(
        self, stage: str, like: StageReport, *, branch: str | None = None
    ) -> tuple[RunInfo, StageReport] | None:
        env = like.environment
        args: list[object] = [stage]
        conds = ["stage = ?", "status = 'passed'", "(verdict IS NULL OR verdict IN (?, ?))"]
        args += list(BASELINE_VERDICTS)
        for column, value in (("channel", env.channel), ("device_kind", env.device_kind), ("arch", env.arch)):
            conds.append(self._eq(column, value, args))
        if branch:
            conds.append("ref = ?")
            args.append(branch)
        self._scope(conds, args)
        now = self._clock()
        self.skipped = []
        with self._connect() as conn:
            near = believed(self, conds, args, now, "baseline record", conn=conn)
            where = " AND ".join(conds)
            query = f"SELECT {RECORD} FROM results WHERE {where} ORDER BY recorded_at DESC, id DESC LIMIT ?"  # noqa: S608 - constant column names and ? placeholders only  # nosec B608
            rows = self._rows(query, [*args, _SCAN + near], conn)
        device = env.device_kind if env.arch in (None, env.device_kind) else f"{env.device_kind} {env.arch}"
        on = f", branch {branch}" if branch else ""
        self.why_missing = (
            f"no passed {stage} result on {device} ({env.channel} channel{on}, verdict pass or warn) in "
            f"{self.where()} yet (first run of this branch or device)"
        )
        found, reasons = first_comparable(self._usable(rows, now=now), like)
        if found is not None:
            self.why_missing = ""
        elif reasons:
            self.why_missing = reasons[0]  # the newest candidate's reason, as the GitLab store reports
        return found

    def _usable(
        self, rows: Iterable[Sequence[Any]], *, baseline: bool = True, now: dt.datetime | None = None
    ) -> Iterator[tuple[RunInfo, StageReport]]:
        """The rows that parse (and, for a ``baseline``, hold only usable numbers) and were not recorded after
        ``now`` (``beyond_clock``: the reading job's clock), read one at a time; the others are named in
        ``skipped``."""
        late_of = clock_check(now or self._clock())
        for row_id, ref, commit, pipeline, verdict, at, text, tag, stack, channel in rows:
            info = RunInfo(ref, commit, pipeline, verdict, at, f"{self.label}:{row_id}", tag, json_dict(stack) or None)
            late = late_of(at)
            if late:
                what = "baseline record" if baseline else "record"
                self.skipped.append(f"{what} {info.describe()} in {self.where()} skipped: {late}")
                continue
            report = self._parse(text, info, baseline=baseline, channel=channel)
            if report is not None:
                yield info, report

    def _parse(
        self, text: Any, info: RunInfo, *, baseline: bool = True, channel: str | None = None
    ) -> StageReport | None:
        """The stored report, or None with the reason in ``skipped``: it does not pass the strict stage-report
        reader that artifacts pass (``read_record``: schema, bounded numbers, finite positive timings), or it
        names another channel than the row it was found by (never obeyed)."""
        raw = text if isinstance(text, (str, bytes, dict)) else None
        report, problem = read_record(raw, f"{self.where()} row {info.run_id}")
        if report is not None and channel is not None:
            problem = contradiction(report.to_dict(), channel)
        if report is None or problem:
            what = "baseline record" if baseline else "record"
            self.skipped.append(f"{what} {info.describe()} in {self.where()} skipped: {problem}")
            return None
        return report

    def history(
        self, stage: str, *, channel: str | None = None, limit: int = 50
    ) -> Sequence[tuple[RunInfo, StageReport]]:
        args: list[object] = [stage]
        conds = ["stage = ?"]
        if channel:
            conds.append("channel = ?")
            args.append(channel)
        self._scope(conds, args)
        now = self._clock()
        self.skipped = []
        with self._connect() as conn:
            near = believed(self, conds, args, now, conn=conn)
            query = (
                f"SELECT {RECORD} FROM results WHERE {' AND '.join(conds)} ORDER BY recorded_at DESC, id DESC LIMIT ?"  # noqa: S608 - constant column names and ? placeholders only  # nosec B608
            )
            rows = self._rows(query, [*args, int(limit) + near], conn)
        return list(self._usable(rows, baseline=False, now=now))[: int(limit)]

    # -- whole-history reads (changes, export) ------------------------------------------------------------
    def series(
        self,
        *,
        stage: str | None = None,
        channel: str | None = None,
        since: str | None = None,
        device: tuple[str | None, str | None] | None = None,
        newest: int | None = None,
        summaries: bool = False,
    ) -> list[SeriesRow]:
        """Every passed stage result, oldest first, as change detection reads it (no report is parsed
        unless the row predates the ``points`` column); ``device`` (kind, arch) narrows it, ``newest``
        keeps only that many of the newest. ``summaries``: a record with its summary in ``results_series``
        comes with ``levels`` and without ``points`` (what ``history changes`` reads, fast)."""
        from gatekeeper.history.points import decode_levels

        self.skipped = []
        conds: list[str] = ["status = 'passed'"]
        args: list[object] = []
        for column, value in (("stage", stage), ("channel", channel)):
            if value:
                conds.append(f"{column} = ?")
                args.append(value)
        if device is not None:
            conds += [self._eq("device_kind", device[0], args), self._eq("arch", device[1], args)]
        if since:
            conds.append("recorded_at >= ?")
            args.append(since)
        self._scope(conds, args)
        now = self._clock()
        late_of = clock_check(now)
        with self._connect() as conn:
            near = believed(self, conds, args, now, conn=conn)
            summaries = summaries and self._series_table(conn, create=False)
        source = f"results LEFT JOIN {SERIES_TABLE} s ON s.result_id = results.id" if summaries else "results"
        columns = SERIES_SUMMARY if summaries else SERIES
        query = f"SELECT {columns} FROM {source} WHERE {' AND '.join(conds)} ORDER BY recorded_at DESC, id DESC"  # noqa: S608 - constant column names and ? placeholders only  # nosec B608
        if newest is not None:
            query += " LIMIT ?"
            args.append(int(newest) + near)
        out = []
        texts: dict[str, dict[str, Any]] = {}  # a history repeats its environments: parse each text once
        names: dict[str, tuple[str, ...] | None] = {}
        rows = list(reversed(self._rows(query, args)))
        summary = [decode_levels(r[18], r[19], names) if r[18] is not None else None for r in rows]
        damaged = [r[0] for r, got in zip(rows, summary, strict=True) if r[18] is not None and got is None]
        points_of = self._points_of(damaged) if damaged else {}  # a summary that does not read: its points
        for row, levels in zip(rows, summary, strict=True):
            rid, st, ch, kind, arch, rocm, model, ref, tag, commit, pipeline, verdict, at, env, stack, pts, cfg, rep = (
                row[:18]
            )
            late = late_of(at)
            if late:
                self.skipped.append(f"record run {self.label}:{rid} in {self.where()} skipped: {late}")
                continue
            env_doc = json_cached(env, texts)  # the stage schema's rule on what this path reads without it
            stored = {"channel": ch, "device_kind": kind, "arch": arch, "rocm_version": rocm}
            bad_env = environment_problem(env_doc) or environment_problem(stored)
            if bad_env:
                self.skipped.append(f"record run {self.label}:{rid} in {self.where()} skipped: {bad_env}")
                continue
            pts = points_of.get(rid, pts)
            points, config = ({} if levels is not None else json_dict(pts)), json_cached(cfg, texts)
            if levels is None and not points:  # a row written before schema 2: read its report once
                parsed = self._parse(rep, RunInfo(ref, commit, pipeline, verdict, at, f"{self.label}:{rid}"))
                if parsed is None:
                    continue
                points, config = metric_points(parsed), dict(parsed.config)
            out.append(
                SeriesRow(
                    rid,
                    st,
                    ch,
                    kind,
                    arch,
                    rocm,
                    model,
                    ref,
                    tag,
                    commit,
                    pipeline,
                    verdict,
                    at,
                    env_doc,
                    json_cached(stack, texts),
                    points,
                    config,
                    levels,
                )
            )
        return out if newest is None else out[max(0, len(out) - int(newest)) :]

    def _points_of(self, ids: Sequence[int]) -> dict[int, Any]:
        """The ``points`` column of these records."""
        out: dict[int, Any] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ", ".join("?" for _ in chunk)
            query = f"SELECT id, points FROM results WHERE id IN ({marks})"  # noqa: S608 - ? placeholders only  # nosec B608
            out.update((row[0], row[1]) for row in self._rows(query, chunk))
        return out

    def records(self) -> Iterator[tuple[RunInfo, StageReport]]:
        """Every stored record, oldest first, with all it was recorded with (for ``history export``)."""
        query = f"SELECT {RECORD} FROM results ORDER BY recorded_at, id"  # noqa: S608 - constant column names  # nosec B608
        self.skipped = []
        yield from self._usable(self._rows(query, []), baseline=False)

    def run(self, run: str) -> list[tuple[RunInfo, StageReport]]:
        """The records of one run: ``LABEL:ID`` (one stage result) or a pipeline id (all its stages)."""
        prefix, _, number = run.partition(":")
        cols = RECORD
        conds: list[str] = []
        args: list[object] = []
        if prefix in ("sqlite", "postgresql", "postgres") and number.isdigit():
            conds.append("id = ?")
            args.append(int(number))
        else:
            conds.append("pipeline_id = ?")
            args.append(run)
        self._scope(conds, args)
        query = f"SELECT {cols} FROM results WHERE {' AND '.join(conds)} ORDER BY id"  # noqa: S608 - constant column names and ? placeholders only  # nosec B608
        rows = self._rows(query, args)
        self.skipped = []
        return list(self._usable(rows))

    # -- anchors (gatekeeper.history.sql_anchors) ------------------------------------------------------
    def anchors(self) -> list[AnchorMark]:
        """Every anchor ever set, newest first."""
        return sql_anchors.anchors(self)

    def set_anchor(self, run: str, *, by: str, reason: str, at: str | None = None) -> AnchorMark:
        """Pin ``run`` as the anchor of its channel and device from now on; the records must exist."""
        return sql_anchors.set_anchor(self, run, by=by, reason=reason, at=at)

    def anchor_records(self, mark: AnchorMark) -> list[tuple[RunInfo, StageReport]]:
        return self.run(mark.run)
