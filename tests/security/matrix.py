"""The hostile-input matrix: every command that reads files x every input it reads x every mutation class.

A case copies one valid world (artifacts, verdict, analysis, history, breaker state, spool, capture, config
files, all written by gatekeeper's own code under one job's CI context), applies one mutation class from
tests/security/mutations.py to one input, runs the command as that job, and checks the invariants
(``check_case``). The control case of each (command, input) runs the world unchanged: it proves the world
is valid, so a refusal in a mutated case comes from the mutation.

Adding a command: an entry in COMMANDS (its argv, the inputs it reads, its exit code on the valid world).
Adding an input: an entry in INPUTS (where it lives, how it is read and written, its roles) and its
expected exit codes in EXPECT. docs/security.md describes the matrix; test_matrix.py runs it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.security import mutations as m

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

# ------------------------------------------------------------------ the job

PROJECT, OTHER_PROJECT = "42", "666"
MR, OTHER_MR = "7", "9"
SHA, OTHER_SHA = "0123456789abcdef0123456789abcdef01234567", "f" * 40
PIPELINE, OTHER_PIPELINE = "991", "13"
TOKEN = "glpat-JobTokenValue0123456789"  # the job's own secret: never in an output either
HOOK_PATH = "/hooks/T0JOB/B0JOB/jobwebhooksecret01"
SPOOL_KEY = "spool-key-Qw8Er6Ty4Ui2"


def job_env(api: str) -> dict[str, str]:
    """The CI variables of the job every case runs as (a merge request into the protected branch)."""
    return {
        "CI": "true",
        "CI_PROJECT_ID": PROJECT,
        "CI_PROJECT_PATH": "ml/model",
        "CI_PROJECT_URL": "https://gitlab.example.com/ml/model",
        "CI_MERGE_REQUEST_IID": MR,
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_DEFAULT_BRANCH": "main",
        "CI_COMMIT_REF_NAME": "feature",
        "CI_COMMIT_SHA": SHA,
        "CI_PIPELINE_ID": PIPELINE,
        "CI_PIPELINE_URL": f"https://gitlab.example.com/ml/model/-/pipelines/{PIPELINE}",
        "CI_JOB_NAME": "gatekeeper:gate",
        "CI_JOB_URL": "https://gitlab.example.com/ml/model/-/jobs/4242",
        "CI_API_V4_URL": f"{api}/api/v4",
        "GATEKEEPER_GITLAB_TOKEN": TOKEN,
        "SLACK_WEBHOOK_URL": f"{api}{HOOK_PATH}",
        "GATEKEEPER_CHANNEL": "stable",
        "GATEKEEPER_SPOOL_KEY": SPOOL_KEY,  # a protected variable: spool entries are authenticated with it
    }


# ------------------------------------------------------------------ inputs


@dataclass(frozen=True)
class Input:
    """One file a command reads: where it lives in the world, how it is parsed and written back."""

    name: str
    path: str  # relative to the world root
    # "json", "jsonl" (one JSON document a line), "yaml", "text"; rows of a sqlite history store:
    # "sqlite-row" (the stored reports of the newest run), "sqlite-series" (what change detection reads of
    # every record), "sqlite-anchor" (the anchors set);
    # "xml" (a JUnit file: its elements as dicts, see ``_xml_load``)
    fmt: str
    roles: m.Roles = field(default_factory=m.Roles)
    what: str = ""

    def load(self, root: Path) -> m.Doc:
        path = root / self.path
        if self.fmt == "json":
            return m.Doc(json.loads(path.read_text(encoding="utf-8")))
        if self.fmt == "jsonl":
            return m.Doc([json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()])
        if self.fmt == "yaml":
            return m.Doc(yaml.safe_load(path.read_text(encoding="utf-8")))
        if self.fmt == "text":
            return m.Doc(path.read_text(encoding="utf-8"))
        if self.fmt == "xml":
            return m.Doc(_xml_load(path.read_bytes()))
        if self.fmt == "sqlite-row":
            return m.Doc([json.loads(text) for _, text in _newest_rows(path)])
        if self.fmt == "sqlite-series":
            return m.Doc([{c: json.loads(v) for c, v in zip(SERIES_COLUMNS, row[1:], strict=True)}
                          for row in _table(path, "results", SERIES_COLUMNS)])  # fmt: skip
        if self.fmt == "sqlite-anchor":
            return m.Doc(
                [dict(zip(ANCHOR_COLUMNS, row[1:], strict=True)) for row in _table(path, "anchors", ANCHOR_COLUMNS)]
            )
        raise AssertionError(self.fmt)

    def dump(self, root: Path, doc: m.Doc) -> None:
        path = root / self.path
        if self.fmt == "text":
            path.write_text(doc.data, encoding="utf-8")
        elif self.fmt == "jsonl":
            path.write_text("".join(_json(line, doc) + "\n" for line in doc.data), encoding="utf-8")
        elif self.fmt == "sqlite-row":
            rows = [rid for rid, _ in _newest_rows(path)]
            with sqlite3.connect(path) as conn:
                for rid, data in zip(rows, doc.data, strict=True):
                    conn.execute("UPDATE results SET report = ? WHERE id = ?", (_json(data, doc), rid))
            _checkpoint(path)
        elif self.fmt == "sqlite-series":
            # a changed record loses its summary (as one an older gatekeeper wrote has none): its columns are read
            values = [[_json(data[c], doc) for c in SERIES_COLUMNS] for data in doc.data]
            _update(path, "results", SERIES_COLUMNS, values, then="DELETE FROM results_series WHERE result_id = ?")
        elif self.fmt == "sqlite-anchor":
            _update(path, "anchors", ANCHOR_COLUMNS, [[data[c] for c in ANCHOR_COLUMNS] for data in doc.data])
        elif self.fmt == "json":
            path.write_text(_json(doc.data, doc), encoding="utf-8")
        elif self.fmt == "xml":
            path.write_bytes(_xml(doc.data, doc))
        else:
            path.write_text(_yaml(doc.data, doc), encoding="utf-8")

    def file(self, root: Path) -> Path:
        """The file the file classes replace (a history's database file for a row input)."""
        return root / self.path


def _json(data: Any, doc: m.Doc) -> str:
    text = json.dumps(data, default=str)
    if doc.token is not None:
        text = text.replace(json.dumps(m.MARK), doc.token)
    if doc.duplicate:  # the first key twice: a decoy value first, which a last-wins reader silently drops
        key = next(iter(data))
        text = "{" + json.dumps(key) + ': "decoy", ' + text[1:]
    return text


def _yaml(data: Any, doc: m.Doc) -> str:
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)
    if doc.token is not None:  # YAML 1.1 spells the non-finite numbers its own way
        token = doc.token.replace("-Infinity", "-.inf").replace("Infinity", ".inf").replace("NaN", ".nan")
        text = text.replace(f"'{m.MARK}'", token).replace(m.MARK, token)
    if doc.duplicate:
        key = next(iter(data))
        text = f"{key}: decoy\n{text}"
    return text


# A JUnit file as a tree of dicts the structured classes walk as they walk JSON: an element is {"#tag": its tag,
# attribute: value, ..., "#text": its text, "#children": [...]}; attribute values that read as numbers are numbers.
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def _xml_load(data: bytes) -> Any:
    from xml.etree import ElementTree  # nosec B405: the world's own file, written by pytest or gatekeeper

    def node(el: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"#tag": el.tag}
        for k, v in el.attrib.items():
            out[k] = (float(v) if "." in v or "e" in v.lower() else int(v)) if _NUMBER.fullmatch(v) else v
        if el.text and el.text.strip():
            out["#text"] = el.text
        if len(el):
            out["#children"] = [node(c) for c in el]
        return out

    return node(ElementTree.fromstring(data))  # nosec B314


_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_escape(value: str, attr: bool) -> str:
    """Escaped as pytest's junitxml writes text: markup escaped, characters XML 1.0 cannot hold as ``#x1B``."""
    text = _XML_ILLEGAL.sub(lambda c: f"#x{ord(c.group()):02X}", value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")
    if attr:
        text = text.replace('"', "&quot;").replace("\n", "&#10;").replace("\t", "&#9;")
    return text


def _xml(data: Any, doc: m.Doc) -> bytes:
    token = doc.token
    if token is not None:  # a number class's token is JSON text: a JSON string is written as its characters
        try:
            loaded = json.loads(token)
        except ValueError:
            loaded = None
        token = loaded if isinstance(loaded, str) else token
    dup = [doc.duplicate]  # the first element with attributes gets its first one twice, a decoy first

    def value(v: Any) -> str:
        if v == m.MARK and token is not None:
            return _xml_escape(token, True)
        return _xml_escape(v if isinstance(v, str) else json.dumps(v), True)

    def element(el: dict[str, Any]) -> str:
        attrs = [(k, v) for k, v in el.items() if not k.startswith("#")]
        if dup[0] and attrs:
            attrs.insert(0, (attrs[0][0], "decoy"))
            dup[0] = False
        head = "<" + el["#tag"] + "".join(f' {k}="{value(v)}"' for k, v in attrs)
        body = _xml_escape(el.get("#text", ""), False) + "".join(element(c) for c in el.get("#children", []))
        return f"{head}>{body}</{el['#tag']}>" if body else f"{head} />"

    return ('<?xml version="1.0" encoding="utf-8"?>\n' + element(data) + "\n").encode("utf-8")


def _checkpoint(db: Path) -> None:
    """Move the write-ahead log into the database file (what the file holds is then what a reader sees)."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


SERIES_COLUMNS = ("points", "fingerprint", "stack", "config")  # JSON columns change detection reads of a record
ANCHOR_COLUMNS = ("run", "channel", "device_kind", "arch", "set_by", "reason", "set_at")


def _table(db: Path, table: str, columns: Iterable[str]) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT id, {', '.join(columns)} FROM {table} ORDER BY id").fetchall()


def _update(db: Path, table: str, columns: Sequence[str], rows: list[list[Any]], *, then: str = "") -> None:
    """Write ``rows`` over ``columns`` of ``table``, row by row in id order (``then``: run on each id after)."""
    ids = [row[0] for row in _table(db, table, columns)]
    sets = ", ".join(f"{c} = ?" for c in columns)
    with sqlite3.connect(db) as conn:
        for rid, values in zip(ids, rows, strict=True):
            conn.execute(f"UPDATE {table} SET {sets} WHERE id = ?", (*values, rid))
            if then:
                conn.execute(then, (rid,))
    _checkpoint(db)


def _newest_rows(db: Path) -> list[tuple[int, str]]:
    """The rows of the newest recorded pipeline (one per stage)."""
    with sqlite3.connect(db) as conn:
        newest = conn.execute("SELECT pipeline_id FROM results ORDER BY recorded_at DESC, id DESC LIMIT 1").fetchone()
        return conn.execute("SELECT id, report FROM results WHERE pipeline_id = ? ORDER BY id", newest).fetchall()


STAGE_NUMBERS = frozenset({"value", "samples", "duration_s"})
STAGE_TEXTS = frozenset({"message", "unit", "description"})
# the environment's names and versions: a control character there is refused (control-in-name)
STAGE_NAMES = frozenset({"host", "device_name", "torch_version", "torch_git_hash", "driver"})
STAGE_CONTEXT = {"channel": "nightly"}  # the job evaluates the stable channel
# A JUnit file's count attributes (which the reader never trusts: it counts the elements) and its free text.
JUNIT_NUMBERS = frozenset({"tests", "failures", "errors", "skipped", "time", "line"})
JUNIT_TEXTS = frozenset({"name", "classname", "message", "#text"})
CACHE_SNAPSHOT = ".gatekeeper-snapshot.json"  # gatekeeper.kernel_cache.usage.SNAPSHOT, in the world's cache kc/
CACHE_ENTRY = "inductor/ab/kernel.py"  # an entry of that cache: its key in the snapshot holds its mtime

INPUTS: dict[str, Input] = {
    i.name: i
    for i in (
        Input(
            "stage artifact", "art/performance_baseline.json", "json",
            m.Roles(STAGE_NUMBERS, STAGE_TEXTS, STAGE_CONTEXT, names=STAGE_NAMES),
            "a stage's <stage>.json (the code under test wrote it)",
        ),
        Input(
            "gates file", "gates.yaml", "yaml",
            m.Roles(frozenset({"alpha", "min_effect", "max_skipped", "version"}), frozenset({"description"})),
            "gates.yaml of the merge request",
        ),
        Input(
            "history row", "hist/history.db", "sqlite-row",
            m.Roles(STAGE_NUMBERS, STAGE_TEXTS, STAGE_CONTEXT, names=STAGE_NAMES),
            "the newest recorded run in a sqlite history (any job with cache access can write it)",
        ),
        Input(
            "log", "logs/job.log", "text", m.Roles(), "a failed job's log (the code under test wrote it)",
        ),
        Input(
            "known issues", "known-issues.yaml", "yaml",
            m.Roles(frozenset({"priority", "confidence"}), frozenset({"explanation", "remediation"})),
            "the repository's known-issues.yaml",
        ),
        Input(
            "verdict", "art/verdict.json", "json",
            m.Roles(
                frozenset({"value", "baseline_value", "change", "exit_code", "p_value", "effect"}),
                frozenset({"summary", "reason", "name", "gates_file", "unit"}),
                {"mr_iid": int(OTHER_MR), "project_url": "https://gitlab.example.com/other/project",
                 "commit": OTHER_SHA, "pipeline_id": OTHER_PIPELINE, "channel": "nightly"},
                names=frozenset({"device_name"}),
            ),
            "verdict.json in the artifacts (stage jobs can write the artifacts directory)",
        ),
        Input(
            "analysis", "art/analysis.json", "json",
            m.Roles(frozenset({"confidence", "line"}), frozenset({"explanation", "remediation", "text", "category"})),
            "analysis.json from the diagnose job",
        ),
        Input(
            "alert state", "alert/state.json", "json",
            # a job failing since the last alert, alerted "in 9999": believed, its repeat would never be due
            m.Roles(frozenset({"runs"}), times={"jobs.*.failing": True, "jobs.*.last_alert": m.FUTURE}),
            "notify slack --state (cache)",
        ),
        Input(
            "spool entry", "spool/pending/entry.json", "json",
            m.Roles(
                frozenset({"mr_iid", "attempts"}), frozenset({"note", "description", "text", "reason"}),
                {"project": OTHER_PROJECT, "mr_iid": int(OTHER_MR), "sha": OTHER_SHA, "pipeline_id": OTHER_PIPELINE},
            ),
            "a message notify spooled (alerts/ sits under the artifacts, where stage jobs write)",
        ),
        Input(
            "breaker state", "state/nightly--performance_baseline.json", "json",
            m.Roles(frozenset({"consecutive_failures"}), frozenset({"last_diagnosis", "diagnosis", "by", "reason"}),
                    {"channel": "stable"},
                    # open "since 9999": believed, the cool-down never ends and the job is skipped for ever
                    times={"state": "open", "opened_at": m.FUTURE}),
            "a breaker's state file (the state directory, cache)",
        ),
        Input(
            "breaker marker", "art/verify_hip.breaker.json", "json",
            m.Roles(frozenset(), frozenset({"message"}), {"pipeline_id": OTHER_PIPELINE, "channel": "stable"}),
            "an upstream job's skip marker in the artifacts",
        ),
        Input(
            "capture", "cap/rocminfo.txt", "text", m.Roles(m.DIGITS), "a doctor --capture directory (someone's paste)",
        ),
        Input(
            "capture tools", "cap/tools.json", "json",
            m.Roles(frozenset({"duration_s"}), frozenset({"detail", "status"})), "tools.json of a capture",
        ),
        Input(
            "matrix file", "matrix.yaml", "yaml",
            m.Roles(frozenset({"eol_warning_days"}), frozenset({"note", "notes", "summary"})),
            "matrix.yaml (release dates, CVEs)",
        ),
        Input(
            "history series", "hist/changes.db", "sqlite-series",
            m.Roles(frozenset({"latency_ms", "throughput", "batch_size"}),
                    frozenset({"image", "gatekeeper", "model"}),
                    {"channel": "nightly", "project": "other/project"}, names=frozenset({"torch_version"})),
            "what history changes reads of every record of a sqlite store (the medians, stack, configuration), "
            "without the summary an older gatekeeper did not write",
        ),
        Input(
            "anchor row", "hist/changes.db", "sqlite-anchor",
            m.Roles(frozenset(), frozenset({"set_by", "reason"}), times={"set_at": m.FUTURE}),
            "the anchors set in a sqlite store (who, why)",
        ),
        Input(
            "history export", "hist/export.jsonl", "jsonl",
            m.Roles(
                STAGE_NUMBERS, STAGE_TEXTS | {"set_by", "reason", "image"},
                # a time it claims of itself: not after the importing job's clock (2026-12-04 audit)
                {"project": "other/project", "recorded_at": "9999-12-31T00:00:00+00:00", "set_at": "zzz"},
                times={"recorded_at": m.FUTURE, "set_at": m.FUTURE}, names=STAGE_NAMES,
            ),
            "a history export or evaluate's history-spool.jsonl (beside the verdict, where stage jobs write)",
        ),
        Input(
            "bisect result", "bisect/bisect.json", "json",
            m.Roles(
                frozenset({"exit_code", "duration_s", "processes", "timeout_s", "max_processes", "first_bad",
                           "last_good", "run"}),
                frozenset({"label", "subject", "author", "reason", "outcome", "note", "symptom", "metric", "culprit",
                           "repro_bundle"}),
                {"result.signature.project": OTHER_PROJECT, "result.signature.mr_iid": int(OTHER_MR)},
            ),
            "bisect.json of a finished bisection (the bisect job's --out, in its artifacts)",
        ),
        Input(
            "cache snapshot", f"kc/{CACHE_SNAPSHOT}", "json",
            m.Roles(frozenset({"started_ns", CACHE_ENTRY})),
            "the kernel cache's snapshot of cache stats --begin (the cache root: any job with the cache writes it)",
        ),
        Input(
            "capture fs", "cap/fs.json", "json", m.Roles(frozenset(), frozenset({"path", "group", "groups"})),
            "fs.json of a capture (device nodes, groups)",
        ),
        Input(
            "capture torch", "cap/torch.json", "json",
            m.Roles(frozenset({"total_memory"}), frozenset({"version", "name", "gfx_arch", "compute_capability"})),
            "torch.json of a capture (what the torch probe printed)",
        ),
        Input(
            "nightly state", "nightly/state.json", "json", m.Roles(),
            "the previous night of bisect --since-green (the job's cache: any job with the cache can write it)",
        ),
        Input(
            "changes state", "nightly/changes.json", "json", m.Roles(),
            "the changes bisect --since-change has bisected (the job's cache: any job with the cache can write it)",
        ),
        Input(
            "soak series", "art/performance_baseline.soak.jsonl", "jsonl",
            m.Roles(frozenset({"t_s", "iterations", "throughput", "latency_ms_median", "memory_mb"})),
            "performance_baseline's soak windows (the code under test wrote them), plotted by the report",
        ),
        Input(
            "junit report", "reports/pytest.xml", "xml", m.Roles(JUNIT_NUMBERS, JUNIT_TEXTS),
            "a test runner's JUnit file that a junit: gate reads (pytest wrote it, running the code under test)",
        ),
        Input(
            "stage junit", "art/functional_test.junit.xml", "xml", m.Roles(JUNIT_NUMBERS, JUNIT_TEXTS),
            "a stage's <stage>.junit.xml beside its <stage>.json (the stage job wrote it)",
        ),
    )
}  # fmt: skip

# ------------------------------------------------------------------ commands


@dataclass(frozen=True)
class Command:
    name: str
    argv: tuple[str, ...]  # "{root}" is the world
    inputs: tuple[str, ...]
    control: int  # its exit code on the valid world
    sends: bool = False  # talks to GitLab or Slack (the fake server)
    classes: tuple[str, ...] | None = None  # only these mutation classes (None: all)
    cwd: str = ""  # where it runs, relative to the world (default: the world)


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "evaluate",
            ("evaluate", "--artifacts", "{root}/art", "--gates", "{root}/gates.yaml", "--out", "{root}/out",
             "--baseline", "sqlite:{root}/hist/history.db", "--channel", "stable"),
            ("stage artifact", "gates file", "history row", "stage junit"), 1,
        ),
        # junit: gates (junit-gates.yaml: a pytest report's pass rate, a stage JUnit file's failures), run in the
        # world: a gate's glob is relative to the working directory
        Command(
            "evaluate junit",
            ("evaluate", "--artifacts", "{root}/art", "--gates", "{root}/junit-gates.yaml", "--out", "{root}/out",
             "--channel", "stable"),
            ("junit report", "stage junit"), 3,
        ),
        Command(
            "analyze",
            ("analyze", "{root}/logs/job.log", "--artifacts", "{root}/art", "--known-issues",
             "{root}/known-issues.yaml", "--gates", "{root}/gates.yaml", "--format", "md",
             "--out", "{root}/out/analysis.md", "--bundle", "{root}/out/bundle"),
            ("log", "stage artifact", "known issues", "gates file"), 0,
        ),
        Command(
            "report",
            ("report", "--artifacts", "{root}/art", "--history", "sqlite:{root}/hist/history.db",
             "--format", "md", "--out", "{root}/out/report.md"),
            ("stage artifact", "verdict", "analysis", "history row", "soak series"), 0,
        ),
        # The HTML page draws plots (seconds each): only the classes that reach a plot or the page's markup.
        Command(
            "report html",
            ("report", "--artifacts", "{root}/art", "--history", "sqlite:{root}/hist/history.db",
             "--out", "{root}/out/report.html"),
            ("stage artifact", "verdict", "history row", "soak series"), 0,
            classes=("huge-number", "non-finite", "string-number", "control-chars", "markup"),
        ),
        Command(
            "notify gitlab",
            ("notify", "gitlab", "--verdict", "{root}/art/verdict.json", "--analysis", "{root}/art/analysis.json",
             "--spool", "{root}/out/spool"),
            ("verdict", "analysis"), 0, sends=True,
        ),
        Command(
            "notify slack",
            ("notify", "slack", "--verdict", "{root}/art/verdict.json", "--analysis", "{root}/art/analysis.json",
             "--state", "{root}/alert/state.json", "--spool", "{root}/out/spool"),
            ("verdict", "analysis", "alert state"), 0, sends=True,
        ),
        Command("notify --resend", ("notify", "--resend", "--spool", "{root}/spool"), ("spool entry",), 0, sends=True),
        Command("doctor --from", ("doctor", "--from", "{root}/cap"),
                ("capture", "capture tools", "capture fs", "capture torch"), 0),
        Command(
            "breaker check",
            ("breaker", "check", "--channel", "nightly", "--job", "performance_baseline", "--state", "{root}/state",
             "--artifacts", "{root}/art", "--after", "functional_test"),
            ("breaker state", "breaker marker", "stage artifact"), 0,
        ),
        Command("breaker status", ("breaker", "status", "--state", "{root}/state"), ("breaker state",), 0),
        Command(
            "breaker record",
            ("breaker", "record", "--channel", "nightly", "--job", "performance_baseline", "--exit-code", "1",
             "--state", "{root}/state", "--artifacts", "{root}/art"),
            ("breaker state", "stage artifact"), 0,
        ),
        Command(
            "matrix",
            ("matrix", "--history", "sqlite:{root}/hist/history.db", "--matrix-file", "{root}/matrix.yaml",
             "--out", "{root}/out/matrix"),
            ("history row", "matrix file"), 0,
        ),
        Command(
            "advise",
            ("advise", "--history", "sqlite:{root}/hist/history.db", "--breaker-state",
             "{root}/state/nightly--performance_baseline.json", "--arch", "gfx90a"),
            ("history row", "breaker state"), 0,
        ),
        Command(
            "breaker reset",
            ("breaker", "reset", "--channel", "nightly", "--job", "performance_baseline", "--state", "{root}/state",
             "--by", "ann", "--reason", "runner fixed"),
            ("breaker state",), 0,
        ),
        Command(
            "history changes", ("history", "changes", "--history", "sqlite:{root}/hist/changes.db"),
            ("history series", "anchor row"), 0,
        ),
        Command("history anchor", ("history", "anchor", "--history", "sqlite:{root}/hist/changes.db"), ("anchor row",), 0),
        Command(
            "history platforms",
            ("history", "platforms", "--history", "sqlite:{root}/hist/changes.db", "--commit", f"{7:040x}"),
            ("history series",), 0,
        ),
        Command(
            "history alarms",
            ("history", "alarms", "--history", "sqlite:{root}/hist/history.db", "--gates", "{root}/gates.yaml"),
            ("history row", "gates file"), 0,
        ),
        Command(
            "history export",
            ("history", "export", "--history", "sqlite:{root}/hist/history.db", "--out", "{root}/out/export.jsonl"),
            ("history row",), 0,
        ),
        Command(
            "history import",
            ("history", "import", "--from", "{root}/hist/export.jsonl", "--into", "sqlite:{root}/out/imported.db"),
            ("history export",), 0,
        ),
        Command(
            "notify issue --bisect",
            ("notify", "issue", "--bisect", "{root}/bisect/bisect.json", "--spool", "{root}/out/spool"),
            ("bisect result",), 0, sends=True,
        ),
        Command(
            "notify issue --verdict",
            ("notify", "issue", "--verdict", "{root}/art/verdict.json", "--spool", "{root}/out/spool"),
            ("verdict",), 0, sends=True,
        ),
        # A finished bisection resumed: every round is reused, nothing runs (a new candidate would run the command)
        Command("bisect --resume", ("bisect", "--resume", "--out", "{root}/bisect"), ("bisect result",), 0, cwd="repo"),
        # The kernel cache: its snapshot is the file it reads; links, FIFOs, depth and names inside the cache
        # (the shape of a directory, not of a file) are tests/kernel_cache/test_cache_trust.py
        Command("cache stats", ("cache", "stats", "--root", "{root}/kc"), ("cache snapshot",), 0),
        Command("cache stats --begin", ("cache", "stats", "--root", "{root}/kc", "--begin"), ("cache snapshot",), 0),
        Command(
            "cache stats --into",
            ("cache", "stats", "--root", "{root}/kc", "--into", "{root}/art/performance_baseline.json"),
            ("cache snapshot", "stage artifact"), 0,
        ),
        Command("cache prune", ("cache", "prune", "--root", "{root}/kc", "--max-size", "1M"), ("cache snapshot",), 0),
        # The nightly job's decision (the previous night was red too: nothing is bisected, the state records tonight)
        Command(
            "bisect --since-green",
            ("bisect", "--since-green", "{root}/nightly/state.json", "--verdict", "{root}/nightly/verdict.json"),
            ("nightly state",), 0,
        ),
        # The nightly job's history step (the store's one change is confirmed by its anchor: nothing is bisected)
        Command(
            "bisect --since-change",
            ("bisect", "--since-change", "{root}/nightly/changes.json", "--history", "sqlite:{root}/hist/changes.db"),
            ("changes state", "history series", "anchor row"), 0,
        ),
    )
}  # fmt: skip

# Every command of the CLI (``gatekeeper --help``, down to its subcommands) is in COMMANDS or here, with why not
# (test_matrix.py fails on a new command that is neither): "COMMAND" or "COMMAND: the mode that is not a case".
UNCOVERED = {
    "stage": "runs the code under test; what it writes is the matrix's stage artifact",
    "pipeline": "runs every stage, then evaluate (whose inputs are evaluate's cases)",
    "gpu-check": "runs every stage at GPU sizes (minutes of real work); it reads what its own stages wrote, and "
    "gates.yaml through evaluate's reader (evaluate's gates file cases)",
    "ab": "runs the stage for base and head in worktrees (minutes); it reads only what its own rounds wrote",
    "bisect: a new bisection": "runs the command or stage on every candidate (the bisect job itself); "
    "--resume of a finished bisection, which runs nothing again, is a case",
    "doctor: this machine, doctor gitlab": "read the live machine's tools and GitLab's API, no file a job wrote; "
    "a capture (--from) is a case",
    "history anchor: --set": "writes an anchor; the run's records are read as history export reads them (cases)",
    "cache key": "reads the machine's ROCm/CUDA installation, no file a job wrote",
    "cache env": "prints variables, reads no file",
}

# Inputs whose file is not in the valid world of every case: copied in only for that input's cases.
OPTIONAL = {"breaker marker": "templates/verify_hip.breaker.json"}
# (command, input) whose exit code on the valid world differs from the command's.
CONTROL = {("breaker check", "breaker marker"): 4}
# An input a command reads under another path than INPUTS names (the stage artifact a breaker check comes after).
REDIRECT = {("breaker check", "stage artifact"): "art/functional_test.json"}


def input_for(command: str, name: str) -> Input:
    spec = INPUTS[name]
    path = REDIRECT.get((command, name))
    return Input(spec.name, path, spec.fmt, spec.roles, spec.what) if path else spec


def control(command: str, name: str) -> int:
    return CONTROL.get((command, name), COMMANDS[command].control)


# ------------------------------------------------------------------ the valid world


def build_world(root: Path, api: str, refused: str) -> None:
    """Every input of the matrix, valid and written by gatekeeper's own code under the job's context."""
    import contextlib
    import io

    from gatekeeper.breaker.markers import write_marker
    from gatekeeper.cli import main
    from gatekeeper.contract.stage_report import Metric
    from tests.support.release_history import day, environment, pipeline, record, sqlite_store, write_pipeline

    env = job_env(api)
    saved = dict(os.environ)
    cwd = Path.cwd()
    os.environ.update(env)
    root.mkdir(parents=True, exist_ok=True)
    os.chdir(root)

    def run(*argv: str, expect: Iterable[int] = (0,)) -> None:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
        assert code in tuple(expect), f"building the world: {argv}: {code}\n{out.getvalue()}\n{err.getvalue()}"

    try:
        stable = environment(channel="stable")
        store = sqlite_store(root / "hist")
        for k in range(1, 6):
            record(store, pipeline(stable, started_at=day(k), pass_rate=1.0), verdict="pass", pipeline_id=f"p{k}")
        # twice the recorded latency: the latency gate blocks, so notify has an alert to send
        reports = pipeline(stable, started_at=day(20), pass_rate=1.0, median_ms=40.0)
        verify = reports[0]  # the default gates also read verify_hip's hygiene count
        metrics = {**verify.metrics, "hygiene_problems": Metric.of(0.0, "count", "lower")}
        reports[0] = dataclasses.replace(verify, metrics=metrics)
        art = write_pipeline(root / "art", reports)
        shutil.copy(REPO / "gates.yaml", root / "gates.yaml")
        shutil.copy(REPO / "matrix.yaml", root / "matrix.yaml")
        (root / "known-issues.yaml").write_text(
            "issues:\n"
            "  - id: conv-fp16\n"
            "    category: numerical_mismatch\n"
            "    priority: 60\n"
            "    confidence: 0.8\n"
            "    patterns: ['conv2d_float16']\n"
            "    explanation: fp16 conv differs by one ulp.\n"
            "    remediation: [Wait for the MIOpen fix]\n",
            encoding="utf-8",
        )
        (root / "logs").mkdir()
        (root / "logs" / "job.log").write_text(
            "collecting ...\nFAILED test_ops.py::test_conv2d_float16 - AssertionError: Tensor-likes are not close!\n"
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB\n",
            encoding="utf-8",
        )
        run("evaluate", "--artifacts", str(art), "--gates", "gates.yaml", "--out", str(art),
            "--baseline", f"sqlite:{root / 'hist' / 'history.db'}", "--channel", "stable", expect=(1,))  # fmt: skip
        run("analyze", "logs/job.log", "--artifacts", str(art), "--format", "json", "--out", str(art / "analysis.json"))
        run("breaker", "record", "--channel", "nightly", "--job", "performance_baseline", "--exit-code", "1",
            "--diagnosis", "hipErrorNoBinaryForGpu on gfx90a", "--state", "state")  # fmt: skip
        # the alert state after a passing run of this job: the blocked verdict is news, so a case sends its alert
        reports_ok = [dataclasses.replace(r, metrics={**r.metrics, **metrics}) if r.stage == "verify_hip" else r
                      for r in pipeline(stable, started_at=day(19), pass_rate=1.0)]  # fmt: skip
        passing = write_pipeline(root / "passing", reports_ok)
        run("evaluate", "--artifacts", str(passing), "--gates", "gates.yaml", "--out", str(passing),
            "--baseline", f"sqlite:{root / 'hist' / 'history.db'}", "--channel", "stable", expect=(0, 3))  # fmt: skip
        run("notify", "slack", "--verdict", str(passing / "verdict.json"), "--state", "alert/state.json",
            "--spool", "unused")  # fmt: skip
        shutil.rmtree(passing)
        os.environ["CI_API_V4_URL"] = f"{refused}/api/v4"  # nobody listens: the note is spooled
        run("notify", "gitlab", "--verdict", str(art / "verdict.json"), "--analysis", str(art / "analysis.json"),
            "--spool", "spool")  # fmt: skip
        (entry,) = (root / "spool" / "pending").glob("*.json")
        entry.rename(entry.with_name("entry.json"))
        (root / "cap").mkdir()
        shutil.copy(FIXTURES / "env" / "rocminfo__thamada-mi300x-x4.txt", root / "cap" / "rocminfo.txt")
        (root / "cap" / "tools.json").write_text(
            json.dumps({"rocminfo": {"status": "ok", "detail": "exit 0", "duration_s": 0.4}}), encoding="utf-8"
        )
        (root / "templates").mkdir()
        write_marker(str(root / "templates"), "nightly", "verify_hip", "verify_hip skipped by its breaker", env)
        shutil.rmtree(root / "unused", ignore_errors=True)
        _history_world(root, run)
        _bisect_world(root, run)
        _cache_world(root, run)
        _reader_world(root, run)
        _junit_world(root)
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)


def _history_world(root: Path, run: Any) -> None:
    """A store whose latency moved by 30% with torch 2.6 and a new image (a change point, with what changed in
    the stack), an anchor set on the first run after it, and its export (what history import reads)."""
    from gatekeeper.history import RunInfo, open_store
    from tests.support.release_history import day, environment, performance

    spec = f"sqlite:{root / 'hist' / 'changes.db'}"
    store = open_store(spec, create=True)  # as evaluate --record opens it: project = the job's CI_PROJECT_PATH
    for k in range(1, 13):
        newer = k > 6
        report = performance(
            environment(torch="2.6.0+rocm6.2" if newer else "2.5.1+rocm6.2"), started_at=day(k),
            median_ms=26.0 if newer else 20.0,
        )  # fmt: skip
        stack = {"gatekeeper": "0.1.0", "image": f"rocm/pytorch:{'2.6' if newer else '2.5'}", "project": "ml/model"}
        info = RunInfo(ref="main", commit=f"{k:040x}", pipeline_id=f"c{k}", verdict="pass",
                       recorded_at=report.started_at, stack=stack)  # fmt: skip
        store.save(report, info)
    run("history", "anchor", "--history", spec, "--set", "c7", "--by", "ann", "--reason", "torch 2.6 is the baseline")
    run("history", "export", "--history", spec, "--out", str(root / "hist" / "export.jsonl"))


def _bisect_world(root: Path, run: Any) -> None:
    """A real bisection, finished: a git repository of five commits whose fourth adds the file the command
    fails on, bisected by ``gatekeeper bisect --provider git -- sh -c 'test ! -f bad'`` (milliseconds a run)."""
    from tests.bisect.builders import make_repo

    repo = root / "repo"
    make_repo(repo, 5, lambda i: {"n.txt": f"{i}\n", **({"bad": "since commit 4\n"} if i >= 4 else {})})
    shutil.rmtree(repo / ".git" / "hooks", ignore_errors=True)  # git's samples: copied for every case otherwise
    cwd = Path.cwd()
    os.chdir(repo)
    try:
        run("bisect", "--provider", "git", "--good", "HEAD~4", "--bad", "HEAD", "--out", str(root / "bisect"),
            "--", "sh", "-c", "test ! -f bad")  # fmt: skip
    finally:
        os.chdir(cwd)


def _cache_world(root: Path, run: Any) -> None:
    """A kernel cache (an Inductor kernel, a Triton binary, a sound MIOpen user db) and its snapshot, as
    ``cache stats --begin`` writes it at a job's start."""
    cache = root / "kc"
    for rel, data in ((CACHE_ENTRY, b"def kernel(): pass\n"), ("triton/x1/k.hsaco", b"\x7fELF" + b"\0" * 60)):
        (cache / rel).parent.mkdir(parents=True, exist_ok=True)
        (cache / rel).write_bytes(data)
    (cache / "miopen" / "db").mkdir(parents=True)
    conn = sqlite3.connect(cache / "miopen" / "db" / "gfx942_304.udb")
    with conn:
        conn.execute("CREATE TABLE perf_db (id INTEGER PRIMARY KEY, solver TEXT, params TEXT)")
        conn.execute("INSERT INTO perf_db (solver, params) VALUES ('ConvBinWinograd3x3U', '1,1,1')")
    conn.close()
    run("cache", "stats", "--root", str(cache), "--begin")


def _reader_world(root: Path, run: Any) -> None:
    """The capture's fs.json and torch.json (the four MI300X of its rocminfo.txt), a soak series beside the
    artifacts, and the nightly bisect state after a red night with tonight's (red) nightly verdict."""
    from gatekeeper.contract.verdict import read_verdict, write_verdict
    from gatekeeper.core import files
    from gatekeeper.machine.hygiene import DeviceNode, FsFacts

    renders = tuple(DeviceNode(f"/dev/dri/renderD{128 + 8 * i}", True, True, True, "render") for i in range(4))
    fs = FsFacts(DeviceNode("/dev/kfd", True, True, True, "render"), DeviceNode("/dev/dri", True, True, True, "video"),
                 renders, ("render", "video"))  # fmt: skip
    files.write_json(root / "cap" / "fs.json", fs.to_dict())
    gpu = {"name": "AMD Instinct MI300X", "gfx_arch": "gfx942:sramecc+:xnack-", "compute_capability": "9.4",
           "total_memory": 205822885888}  # fmt: skip
    torch = {"version": "2.5.1+rocm6.2", "hip": "6.2.41133-dd7f95766", "cuda": None, "available": True,
             "arch_list": ["gfx942"], "devices": [gpu] * 4, "miopen": "3.2.0"}  # fmt: skip
    files.write_json(root / "cap" / "torch.json", torch)
    windows = [{"t_s": 30.0 * k, "iterations": 900 + k, "throughput": 1200.0 - k, "latency_ms_median": 26.5,
                "memory_mb": 2048.0 + k} for k in range(1, 5)]  # fmt: skip
    files.atomic_write(root / "art" / "performance_baseline.soak.jsonl", "".join(json.dumps(w) + "\n" for w in windows))
    verdict = read_verdict(str(root / "art" / "verdict.json"))
    write_verdict(dataclasses.replace(verdict, channel="nightly"), root / "nightly" / "verdict.json")
    state = str(root / "nightly" / "state.json")
    run("bisect", "--since-green", state, "--verdict", str(root / "nightly" / "verdict.json"))  # the first night
    # the since-change state after the store's change was bisected (before its anchor confirmed it): a case
    # whose anchor no longer confirms it (one claiming a future time is not believed) bisects nothing either
    from gatekeeper.bisect.since_change import record_bisected
    from gatekeeper.history.changes import find_changes
    from gatekeeper.history.sqlite import SqliteStore

    [change] = find_changes(SqliteStore(root / "hist" / "changes.db").series(summaries=True), metric="latency_ms")
    identity = {"stage": change.stage, "metric": change.metric, "series": dict(change.key),
                "first_run_id": change.first.row_id, "first_commit": change.first.commit,
                "first_at": change.first.recorded_at}  # fmt: skip
    record_bisected(root / "nightly" / "changes.json", identity)


JUNIT_GATES = """\
version: 1
gates:
  unit-tests:
    description: The unit tests pass (one known float-rounding failure warns, and is named).
    junit: "reports/*.xml"
    metric: pass_rate
    pass: ">= 1.0"
    warn: ">= 0.8"
  functional-junit:
    description: No check fails in the stage's own JUnit file (the one known mismatch, aten.nextafter, warns).
    junit: "art/functional_test.junit.xml"
    metric: failures
    pass: "== 0"
    warn: "<= 1"
"""

JUNIT_SUITE = """\
import pytest


def test_add():
    assert 1 + 1 == 2


@pytest.mark.parametrize("n", [1, 2, 3])
def test_positive(n):
    print(f"checking {n}")
    assert n > 0


def test_rounding():
    assert 0.1 + 0.2 == 0.3, "float rounding"


@pytest.mark.skip(reason="needs a GPU")
def test_on_gpu():
    pass


def test_sorted():
    assert sorted([3, 1, 2]) == [1, 2, 3]
"""


def _junit_world(root: Path) -> None:
    """reports/pytest.xml as pytest writes it (a real run: 7 tests, one failure, one skip) and the gates that
    read it and the stage's JUnit file (junit-gates.yaml: both gates warn, so their reasons name the failing
    tests, and a test's name reaches every output)."""
    import sys

    from gatekeeper.core import proc

    suite = root / "suite"
    suite.mkdir()
    (suite / "test_unit.py").write_text(JUNIT_SUITE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CI", "GATEKEEPER_"))}
    res = proc.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_logging=all",
         f"--rootdir={suite}", f"--junitxml={root / 'reports' / 'pytest.xml'}", str(suite)],
        timeout=120, cwd=suite, env=env,
    )  # fmt: skip
    assert res.returncode == 1, res.describe() + res.stdout[-2000:]  # one test fails, on purpose
    assert (root / "reports" / "pytest.xml").is_file()
    shutil.rmtree(suite)
    (root / "junit-gates.yaml").write_text(JUNIT_GATES, encoding="utf-8")


def open_issues(root: Path) -> list[dict[str, Any]]:
    """The regression issues the fake GitLab lists as ours (written by the token's user, with a valid marker):
    the world's bisection's, and one for the metric its verdict fails, so notify issue updates, comments on or
    closes them (what it sends is then checked, not only what it would create)."""
    from gatekeeper.contract.bisect_report import fingerprint, read_bisect
    from gatekeeper.contract.verdict import read_verdict
    from gatekeeper.notify.issue import bisect_payload, render_description

    doc = read_bisect(root / "bisect" / "bisect.json")
    verdict = read_verdict(str(root / "art" / "verdict.json"))
    failing = next(g for g in verdict.gates if g.outcome.value == "fail")
    signature = {"metric": failing.metric, "channel": verdict.channel, "fingerprint": fingerprint(verdict.environment),
                 "culprit": f"git:{OTHER_SHA}"}  # fmt: skip
    seen = {
        "signature": signature,
        "culprits": [],
        "rows": [],
        "summary": {"run": 1, "candidates": 2},
        "provider": "git",
    }
    return [
        {"iid": 11, "state": "opened", "author": {"id": 1}, "title": "regression (bisected)",
         "description": render_description(bisect_payload(doc, project=PROJECT, links={}))},
        {"iid": 12, "state": "opened", "author": {"id": 1}, "title": "regression (seen by a verdict)",
         "description": render_description(seen)},
    ]  # fmt: skip


# Parts of the world only some commands read: copied into a case only when its command names them (in its argv
# or as its cwd), so the other cases do not pay for copying a git repository and two more stores.
EXTRAS = ("repo", "bisect", "hist/changes.db", "hist/export.jsonl")


def _extras_skipped(command: str) -> set[str]:
    cmd = COMMANDS[command]
    paths = [a.removeprefix("sqlite:") for a in cmd.argv]
    return {e for e in EXTRAS if cmd.cwd != e and not any(p.startswith(f"{{root}}/{e}") for p in paths)}


def make_case_world(template: Path, root: Path, command: str, name: str) -> Path:
    """A fresh copy of the world for one case; the input's file is there (an optional one copied in)."""
    skipped = _extras_skipped(command)

    def ignore(directory: str, names: list[str]) -> set[str]:
        here = Path(directory).relative_to(template)
        return {n for n in names if (here / n).as_posix() in skipped}

    shutil.copytree(template, root, symlinks=True, ignore=ignore)
    spec = input_for(command, name)
    if name in OPTIONAL:
        shutil.copy(root / OPTIONAL[name], root / spec.path)
    return root / spec.path


# ------------------------------------------------------------------ applying a mutation


def mutate(root: Path, command: str, name: str, cls: str, payload: Any, pool: Path) -> None:
    """Apply mutation class ``cls`` (with ``payload`` for the classes that take one) to one input."""
    spec = input_for(command, name)
    klass = m.CLASSES[cls]
    if klass.kind == "file":
        target = spec.file(root)
        if cls in m.TRANSFORMS:  # changes the valid file it finds
            if spec.fmt in m.SQLITE:
                _checkpoint(target)
            m.FILE_WRITERS[cls](target)
            return
        if cls == "newline-free" and spec.fmt == "xml":  # a valid JUnit file with a test name that long
            m.newline_free_xml(target)
            return
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
        if cls == "newline-free":  # one shared file of that size, hard-linked: no disk per case
            os.link(pool, target)
        else:
            m.FILE_WRITERS[cls](target)
        return
    doc = spec.load(root)
    changed = klass.apply_doc(doc, spec.roles, payload)
    if not changed:
        raise AssertionError(f"{cls} found no field to change in {name} ({spec.path}): update its roles in INPUTS")
    spec.dump(root, doc)


def payload_of(cls: str) -> Any:
    return m.CLASSES[cls].payload


# ------------------------------------------------------------------ expected exit codes

# How each input is read, which decides the exit code of a hostile copy (README "Exit codes", docs/security.md):
# strict: refused, exit 2 naming the file; rows: a bad record is skipped with a warning (the file itself is
# refused); ignored: a bad file is set aside with a warning (quarantined, ignored), the command goes on;
# text: any bytes are a log (only what is not a regular file is refused).
POLICY = {
    "stage artifact": "strict", "gates file": "strict", "known issues": "strict", "verdict": "strict",
    "analysis": "strict", "breaker state": "strict", "capture tools": "strict", "matrix file": "strict",
    "history row": "rows", "breaker marker": "ignored", "spool entry": "ignored", "alert state": "ignored",
    "log": "text", "capture": "text",
    "history series": "rows", "anchor row": "rows", "history export": "strict", "bisect result": "strict",
    "cache snapshot": "strict",
    "capture fs": "strict", "capture torch": "strict", "nightly state": "ignored", "soak series": "ignored",
    "changes state": "ignored",
    "junit report": "junit", "stage junit": "junit",
}  # fmt: skip
# junit: the JUnit reader (gatekeeper/contract/junit.py) as a junit: gate reads a file: anything it cannot read as
# a JUnit document is refused (exit 2 naming the file, never a gate passed on it); the count attributes are never
# read (the test cases are counted), so a hostile count changes nothing; a byte-order mark, UTF-16 and a declared
# ISO-8859-1 are read as what they are.
JUNIT_READABLE = ("utf8-bom", "xml-utf16", "xml-latin1", "newline-free", "deep-nesting")

# Cells that do not exist, with why (every other cell of COMMANDS x inputs x CLASSES is a case).
NOT_APPLICABLE = {
    ("log", "number"): "a log is text: no number fields",
    ("log", "keys"): "a log is text: no keys",
    ("log", "context"): "a log carries no job context",
    ("log", "fifo"): "a log may be a pipe on purpose (analyze reads - and named pipes)",
    ("capture", "keys"): "a tool's raw output is text: no keys",
    ("capture", "context"): "a capture is of another machine by design",
    ("gates file", "context"): "gates.yaml names no channel, project or pipeline",
    ("known issues", "context"): "known-issues.yaml names no channel, project or pipeline",
    ("analysis", "context"): "analysis.json names no channel, project or pipeline",
    ("capture tools", "context"): "a capture is of another machine by design",
    ("matrix file", "context"): "matrix.yaml names no channel, project or pipeline",
    ("alert state", "text"): "the alert state holds no free text (times, counts, booleans)",
    ("alert state", "context"): "keyed by channel:ref:job; another job's key is another job's state",
    ("breaker marker", "number"): "a marker has no number fields",
    ("anchor row", "keys"): "an anchor is a table row: columns, no JSON keys",
    ("anchor row", "context"): "the anchors table holds every channel's anchors: a row names its own, no job's",
    ("cache snapshot", "text"): "the snapshot holds no free text (a time, a flag, entry names only compared, never "
    "shown: hostile names in the cache are tests/kernel_cache/test_cache_trust.py)",
    ("capture fs", "context"): "a capture is of another machine by design",
    ("capture torch", "context"): "a capture is of another machine by design",
    ("nightly state", "text"): "the nightly state holds no free text (a result word, a version, a commit)",
    ("nightly state", "context"): "the previous night is another pipeline and commit by design",
    ("changes state", "text"): "the changes state's texts (stage, metric, series, commit) are only compared with the "
    "store's, never shown or passed on (tests/bisect/test_since_change.py)",
    ("changes state", "context"): "the changes bisected are other pipelines' by design",
    ("soak series", "text"): "a soak window holds numbers only",
    ("soak series", "context"): "a soak window names no channel, project or pipeline",
    ("junit report", "context"): "a JUnit file names no channel, project or pipeline (a host and a time at most)",
    ("stage junit", "context"): "the stage's JUnit file names no channel, project or pipeline (its <stage>.json does)",
}

# Cells whose documented code differs from their input's policy.
OVERRIDE: dict[tuple[str, str, str], frozenset[int]] = {
    # an upstream stage that did not pass (unreadable included) skips the job: exit 4 (breaker check --after)
    **{("breaker check", "stage artifact", c): frozenset({4})
       for c, k in m.CLASSES.items() if k.kind in ("number", "name", "keys", "file")},
    # breaker record reads the job's artifact for the diagnosis only: unreadable, it records the exit code
    **{("breaker record", "stage artifact", c): frozenset({0}) for c in m.CLASSES},
    # a known issue's explanation is one line (schema): a payload with newlines is refused
    ("analyze", "known issues", "markup"): frozenset({2}),
    # an empty file is an empty store: no baseline (the latency gate warns) and no history; a dangling link is
    # no store: evaluate's first run has none (its missing-data policy: the gate warns, --record creates it),
    # a command that only reads is told the path holds no store (exit 2)
    **{("evaluate", "history row", c): frozenset({3}) for c in ("empty", "dangling-symlink")},
    **{(c, "history row", "empty"): frozenset({0})
       for c in ("report", "matrix", "advise", "history export", "history alarms")},
    **{(c, i, "empty"): frozenset({0}) for c, i in (("history changes", "history series"),
                                                   ("history changes", "anchor row"), ("history anchor", "anchor row"))},
    # history platforms needs the run at --commit: a record whose stored medians (or environment: a control
    # character in a name) do not read is skipped, and with every record unreadable there is none to judge
    # (exit 2, naming the first reason)
    **{("history platforms", "history series", c): frozenset({2})
       for c in ("huge-number", "non-finite", "duplicate-key", "control-in-name")},
    # an export of an empty store is an empty file: nothing to import
    ("history import", "history export", "empty"): frozenset({0}),
    # a record of another project than the job's is refused, never filed under it (docs/history.md)
    ("history import", "history export", "context"): frozenset({2}),
    # notify refuses a verdict of another pipeline, commit or merge request (gatekeeper notify --help), exit 2
    **{(c, "verdict", "context"): frozenset({2})
       for c in ("notify gitlab", "notify slack", "notify issue --verdict")},
    # only breaker check reads when a breaker opened (its cool-down); the others keep or replace the time unread
    **{(c, "breaker state", "future-time"): frozenset({0})
       for c in ("breaker status", "breaker record", "breaker reset", "advise")},
    # advise takes a directory of state files too: an empty one holds no breaker
    ("advise", "breaker state", "directory"): frozenset({0}),
    # a capture file must be UTF-8 text (a log need not be)
    ("doctor --from", "capture", "not-utf8"): frozenset({2}),
    # every run of digits 400 long: gfx942 becomes gfx999...9, an arch the capture's torch was not built for, a
    # finding (exit 1; a fuzzed token that reads as no arch at all: exit 0); before the fourth pass of the
    # 2026-12-04 audit this was exit 70 (tests/machine/test_doctor.py)
    ("doctor --from", "capture", "huge-number"): frozenset({0, 1}),
    # status lists only the state files among *--*.json; another document is not one (test_breaker_exact.py)
    ("breaker status", "breaker state", "wrong-type"): frozenset({0}),
    # advise reads a state file's channel and state; a field it does not read is the breaker's to check
    ("advise", "breaker state", "string-number"): frozenset({0}),
    # a capture file that is not a regular file is skipped like a missing one (garbage in rocminfo.txt says
    # nothing about agents: a fact not in the capture, exit 0 as for the text policy; docs/doctor.md)
    **{("doctor --from", "capture", c): frozenset({0})
       for c in ("symlink-loop", "directory", "symlink-device", "fifo", "dangling-symlink")},
    # a capture file holds at most 256 MiB
    ("doctor --from", "capture", "oversized"): frozenset({2}),
    # the nightly state is rewritten with tonight: a directory in its place cannot be, exit 2 naming it
    ("bisect --since-green", "nightly state", "directory"): frozenset({2}),
    # the changes state is one file (rewritten when a change is recorded): a directory in its place is exit 2
    ("bisect --since-change", "changes state", "directory"): frozenset({2}),
    # an empty file is an empty store, with no change point to bisect
    **{("bisect --since-change", i, "empty"): frozenset({0}) for i in ("history series", "anchor row")},
    **{("doctor --from", i, c): frozenset({0}) for i in ("capture tools", "capture fs", "capture torch")
       for c in ("symlink-loop", "directory", "symlink-device", "fifo", "dangling-symlink")},
    # cache stats --begin writes a new snapshot over whatever was there, unread (one that is not a regular file is
    # moved to the quarantine first); prune reads no snapshot (it deletes by size and time, never gatekeeper's files)
    **{(c, "cache snapshot", k): frozenset({0}) for c in ("cache stats --begin", "cache prune") for k in m.CLASSES},
    # evaluate without a junit: gate never parses a stage's JUnit file: it hashes the regular files among the
    # artifacts into the verdict's provenance and leaves out what is not one (the verdict is the control's)
    **{("evaluate", "stage junit", c): frozenset({1}) for c in m.CLASSES},
}  # fmt: skip


def cell(command: str, name: str, cls: str) -> frozenset[int] | str:
    """The exit codes a case may end with, or why the cell does not exist."""
    cmd = COMMANDS[command]
    if cmd.classes is not None and cls not in cmd.classes:
        return f"{command} runs only {', '.join(cmd.classes)} (the other classes run in its md twin)"
    klass = m.CLASSES[cls]
    spec = INPUTS[name]
    if klass.formats is not None and spec.fmt not in klass.formats:
        return f"{cls} is for {', '.join(klass.formats)} inputs; {name} is {spec.fmt}"
    for key in ((name, cls), (name, klass.kind)):
        if key in NOT_APPLICABLE:
            return NOT_APPLICABLE[key]
    if klass.kind == "number" and not spec.roles.numbers:
        return f"{name} has no number fields"
    if klass.kind == "context" and not spec.roles.context:
        return f"{name} names no job context"
    if klass.kind == "time" and not spec.roles.times:
        return f"{name} says no time of itself that a decision depends on"
    if klass.kind == "name" and not spec.roles.names:
        return f"{name} holds no name or version of a stage's environment"
    if (command, name, cls) in OVERRIDE:
        return OVERRIDE[(command, name, cls)]
    ok = control(command, name)  # the input valid
    absent = COMMANDS[command].control  # the input set aside
    policy = POLICY[name]
    if klass.kind == "text":
        return frozenset({ok})
    if klass.kind == "name":  # corrupt or forged, never shown: refused (strict) or the row skipped (rows)
        return frozenset({2} if policy == "strict" else {ok} if policy == "rows" else {absent})
    if klass.kind == "context":  # principle 1: an input error naming both, or ignored with a warning; never obeyed
        return frozenset({2, absent if policy == "ignored" else ok})
    if klass.kind == "time":  # believed up to the job's clock: refused, skipped (rows) or set aside, never obeyed
        return frozenset({2} if policy == "strict" else {ok} if policy == "rows" else {absent})
    if policy == "junit":
        return frozenset({ok}) if klass.kind == "number" or cls in JUNIT_READABLE else frozenset({2})
    if policy == "strict":  # YAML allows a byte-order mark; JSON as gatekeeper reads it does not
        return frozenset({ok}) if cls == "utf8-bom" and spec.fmt == "yaml" else frozenset({2})
    if policy == "rows":
        return frozenset({2}) if klass.kind == "file" else frozenset({ok})
    if policy == "text":
        refused = ("symlink-loop", "directory", "symlink-device", "dangling-symlink")
        return frozenset({2}) if cls in refused else frozenset({ok})
    return frozenset({absent})


# (command, input) that leave out a record which does not read without a warning (any class): the
# control-in-name case cannot see the rule's words there, only the exit code. (report, matrix and advise say it
# in their notes: in the file they write or on stdout, which the check reads too.)
QUIET_SKIP = {
    ("breaker record", "stage artifact"): "reads the job's artifact for the diagnosis only; unreadable, it "
    "records the exit code",
}

CONTROL_CASE = "control"
DRIVER_CLASSES = ("oversized", "newline-free", "symlink-device", "fifo")  # in forked children, memory measured


def cases() -> list[tuple[str, str, str]]:
    """Every (command, input, class) of the matrix, the control case of each (command, input) first."""
    out = []
    for command, cmd in COMMANDS.items():
        for name in cmd.inputs:
            out.append((command, name, CONTROL_CASE))
            out += [(command, name, cls) for cls in m.CLASSES if not isinstance(cell(command, name, cls), str)]
    return out


def not_applicable() -> list[tuple[str, str, str, str]]:
    return [
        (command, name, cls, why)
        for command, cmd in COMMANDS.items()
        for name in cmd.inputs
        for cls in m.CLASSES
        if isinstance(why := cell(command, name, cls), str)
    ]


# ------------------------------------------------------------------ invariants

TERMINAL_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SECRETS = (*m.SECRET_VALUES, TOKEN, HOOK_PATH.rsplit("/", 1)[-1], SPOOL_KEY)
MEMORY_BOUND_MIB = 512  # peak resident memory of one command, whatever the size of its inputs


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    written: dict[Path, tuple[bytes, frozenset[str]]]  # files created or changed: bytes, secrets held before
    sent: list[Any]  # fake_http.Seen requests
    peak_mib: float | None = None


Snapshot = dict[int, tuple[int, int, frozenset[str]]]


def snapshot(root: Path) -> Snapshot:
    """inode -> (size, mtime, the planted secrets already in it) of every regular file (a file merely renamed
    keeps its inode; a changed input, like a sqlite store, is only blamed for a secret it did not hold)."""
    seen = {}
    for path in _regular_files(root):
        st = path.stat()
        seen[st.st_ino] = (st.st_size, st.st_mtime_ns, _secrets_in(path, st.st_size))
    return seen


def _secrets_in(path: Path, size: int) -> frozenset[str]:
    if size > 8 * 2**20:  # the size classes' padding, not data
        return frozenset()
    data = path.read_bytes()
    return frozenset(s for s in SECRETS if s.encode() in data)


def _regular_files(root: Path) -> Iterable[Path]:
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if not path.is_symlink() and path.is_file():
                yield path


def written_since(root: Path, before: Snapshot, limit: int = 64 * 2**20) -> dict[Path, tuple[bytes, frozenset[str]]]:
    """Files created or changed since ``before``: their bytes, and the secrets they held before."""
    out = {}
    for path in _regular_files(root):
        st = path.stat()
        old = before.get(st.st_ino)
        if (old is None or old[:2] != (st.st_size, st.st_mtime_ns)) and st.st_size <= limit:
            out[path] = (path.read_bytes(), old[2] if old else frozenset())
    return out


def problems(command: str, name: str, cls: str, outcome: Outcome, root: Path) -> list[str]:
    """Every invariant the case broke, in words (empty: it held them all)."""
    found = []
    expected = frozenset({control(command, name)}) if cls == CONTROL_CASE else cell(command, name, cls)
    assert not isinstance(expected, str)
    if outcome.code not in expected:
        last = outcome.err.strip().splitlines()[-1:] or [""]
        found.append(f"exit {outcome.code}, documented {sorted(expected)}: {last[0][:300]}")
    elif outcome.code == 2 and expected == {2}:
        named = input_for(command, name).file(root)
        if named.name not in outcome.err:
            found.append(f"exit 2 without naming {named.name}: {outcome.err.strip()[:300]}")
    # a name or version with a control character: refused or skipped by that rule, saying so (not by chance)
    words = "contains a control character"
    said = (
        words in outcome.err
        or words in outcome.out
        or any(words.encode() in data for data, _ in outcome.written.values())
        or (command, name) in QUIET_SKIP
    )
    if cls in m.CLASSES and m.CLASSES[cls].kind == "name" and not said:
        found.append(f"no 'contains a control character' on stderr: {outcome.err.strip()[-300:]}")
    streams = outcome.out + outcome.err
    if TERMINAL_CONTROL.search(streams):
        bad = sorted({repr(c) for c in TERMINAL_CONTROL.findall(streams)})
        found.append(f"raw control characters on the terminal: {', '.join(bad)}")
    for secret in SECRETS:
        if secret in streams:
            found.append(f"secret {secret[:8]}... on stdout/stderr")
        for path, (data, held) in outcome.written.items():
            if secret.encode() in data and secret not in held:
                found.append(f"secret {secret[:8]}... written to {path.relative_to(root)}")
    for path, (data, _held) in outcome.written.items():
        text = data.decode("utf-8", "replace")
        if path.suffix == ".md":
            found += [f"{path.relative_to(root)}: {p}" for p in markdown_problems(text)]
        elif path.suffix == ".html":
            found += [f"{path.relative_to(root)}: {p}" for p in html_problems(text)]
    if (root / "gatekeeper-pwned").exists():
        found.append("a !!python tag in YAML ran its command")
    found += target_problems(outcome.sent)
    # the alert state set aside is "never alerted": the failing job's repeat is due, so the alert goes out (exit 0
    # either way)
    owed = cls in m.CLASSES and m.CLASSES[cls].kind == "time" and name == "alert state"
    if owed and not any(seen.path == HOOK_PATH for seen in outcome.sent):
        found.append("no alert sent: a last_alert after the job's clock was believed (the repeat suppressed)")
    if outcome.peak_mib is not None and outcome.peak_mib > MEMORY_BOUND_MIB:
        found.append(f"peak memory {outcome.peak_mib:.0f} MiB > {MEMORY_BOUND_MIB} MiB")
    return found


_OUR_HTML = ("<!-- gatekeeper", "<details>", "</details>", "<summary>", "</summary>", "<br>")
MENTION = re.compile(r"(?<![\w\u200b])@(all|here|channel|everyone)\b")


def markdown_problems(text: str) -> list[str]:
    """Hostile markup that GitLab would act on: raw HTML, links out, images, mentions, quick actions."""
    from markdown_it import MarkdownIt

    found = []
    tokens = _walk_tokens(MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text))
    for t in tokens:
        if t.type in ("html_block", "html_inline") and not t.content.strip().startswith(_OUR_HTML):
            found.append(f"raw HTML {t.content.strip()[:60]!r}")
        if t.type == "link_open" and "evil.example" in str(t.attrs.get("href")):
            found.append(f"a link to {t.attrs.get('href')}")
        if t.type == "image":
            found.append("an image")
        if t.type == "text" and MENTION.search(t.content):
            found.append(f"a mention in {t.content[:60]!r}")
    code = {i for t in tokens if t.type in ("fence", "code_block") and t.map for i in range(*t.map)}
    for i, line in enumerate(text.splitlines()):
        if i not in code and line.lstrip().startswith(m.QUICK_ACTIONS):
            found.append(f"a quick action line {line.strip()[:40]!r}")
    return found


def _walk_tokens(tokens: list) -> list:
    out = []
    for t in tokens:
        out.append(t)
        out += _walk_tokens(t.children or [])
    return out


def html_problems(text: str) -> list[str]:
    found = []
    for raw in (m.HTML_TAG, "<script>alert(1)</script>", 'href="https://evil.example', 'src="https://evil.example'):
        if raw in text:
            found.append(f"raw {raw!r}")
    return found


SLACK_SPECIAL = re.compile(r"<!(channel|here|everyone)>|<@U|<https://evil\.example")


def slack_problems(payload: Any) -> list[str]:
    texts: list[tuple[str, str]] = []

    def collect(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                collect(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                collect(v, f"{where}[{i}]")
        elif isinstance(node, str):
            texts.append((where, node))

    collect(payload, "message")
    found = []
    for where, text in texts:
        for hit in (*SLACK_SPECIAL.finditer(text), *MENTION.finditer(text)):
            found.append(f"{where}: a Slack special or broadcast: {text[max(0, hit.start() - 20) : hit.end() + 5]!r}")
    return found


_GITLAB = re.compile(
    rf"^/api/v4/(user|projects/{PROJECT}/(merge_requests/{MR}/notes(/\d+)?|statuses/{SHA}|issues(/\d+(/notes)?)?))"
    r"(\?.*)?$"
)


def target_problems(sent: list[Any]) -> list[str]:
    """Nothing goes to a project, merge request, commit or webhook other than the job's; what goes is escaped."""
    found = []
    for seen in sent:
        if seen.path == HOOK_PATH:
            found += slack_problems(seen.json())
        elif _GITLAB.match(seen.path):
            if seen.method in ("POST", "PUT") and seen.body and ("/notes" in seen.path or "/issues" in seen.path):
                sent_doc = json.loads(seen.body)
                for key in ("body", "description"):  # a note's text, an issue's
                    if isinstance(sent_doc.get(key), str):
                        found += [f"{seen.path} {key}: {p}" for p in markdown_problems(sent_doc[key])]
                title = str(sent_doc.get("title") or "")  # plain text, but GitLab still links mentions in it
                if MENTION.search(title) or TERMINAL_CONTROL.search(title) or title.startswith("/"):
                    found.append(f"{seen.path} title: {title[:80]!r}")
        else:
            found.append(f"sent {seen.method} {seen.path}: not the job's project, merge request, commit or webhook")
    return found
