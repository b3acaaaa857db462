"""A stage report's environment holds names and versions: a control character there is refused, never shown.

torch_version, device_name, host... key baselines (fingerprints) and are recorded in history stores and shown
in verdicts, MR notes and ``history changes``. No tool writes a tab, newline, escape or bidi character into
one, so a value with one is corrupt or forged input: the artifact fails validation (one-line InputError, exit
2) like any schema violation (docs/security.md, "Control characters"). One rule, defined once: the character
class of gatekeeper/core/escape.py (``CONTROL_CHARS``), used by the schemas and by the readers of store rows
that skip the schema.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.contract import schemas
from gatekeeper.contract.stage_report import environment_problem, parse_stage, read_stage, write_stage
from gatekeeper.contract.verdict import read_verdict
from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import CONTROL_CHARS
from tests.support.builders import env, report

# Every text field of $defs.environment (the enums device_kind and channel, and the count, are not text).
FIELDS = (
    "torch_version", "torch_git_hash", "hip_version", "cuda_version", "rocm_version", "device_name", "gfx_arch",
    "compute_capability", "driver", "python", "host",
)  # fmt: skip
# One of each class: C0 (NUL, tab, newline, carriage return, escape), DEL, C1 (NEL, the one-byte CSI), a bidi
# embedding, override and isolate, and a bidi mark.
CHARS = {
    "nul": "\x00", "tab": "\t", "lf": "\n", "cr": "\r", "esc": "\x1b", "del": "\x7f", "nel": "\x85", "csi": "\x9b",
    "lre": "\u202a", "rlo": "\u202e", "rli": "\u2067", "pdi": "\u2069", "lrm": "\u200e", "alm": "\u061c",
}  # fmt: skip
NAMES = (
    "Radeon\u2122 Pro W7900",
    "AMD Instinct MI300X",
    "NVIDIA H100 80GB HBM3",
    "Gr\u00f6\u00dfe \u2014 \u65e5\u672c",
)


def _doc(**environment: object) -> dict:
    doc = report("functional_test", metrics={"op_pass_rate": 1.0}).to_dict()
    doc["environment"] = {**doc["environment"], **environment}
    return doc


def _refused(doc: dict) -> InputError:
    with pytest.raises(InputError) as err:
        parse_stage(doc, "art/functional_test.json")
    return err.value


@pytest.mark.parametrize("char", CHARS.values(), ids=CHARS.keys())
@pytest.mark.parametrize("field", FIELDS)
def test_a_control_character_in_an_environment_field_is_refused_naming_the_field(field: str, char: str) -> None:
    # at the end: a "^[^...]*$" pattern lets a trailing newline through (Python's "$" matches before it)
    line = _refused(_doc(**{field: f"2.5.1{char}"})).line()
    assert line.startswith(f"art/functional_test.json:environment.{field}: environment.{field}: the value '2.5.1")
    assert "contains a control character (\\x" in line or "contains a control character (\\u" in line
    assert "\n" not in line  # one line
    assert char not in line  # the character shown escaped
    assert "[\\x00" not in line  # plain words, not the pattern


@pytest.mark.parametrize("value", ["\x1b[31mred", "a\u202eb", "\n"], ids=["start", "middle", "alone"])
def test_the_character_is_found_anywhere_in_the_value(value: str) -> None:
    assert "contains a control character" in _refused(_doc(torch_version=value)).problem


@pytest.mark.parametrize("char", CHARS.values(), ids=CHARS.keys())
def test_an_extra_value_or_key_with_a_control_character_is_refused(char: str) -> None:
    err = _refused(_doc(extra={"miopen_version": f"3.2{char}", "num_threads": 8}))
    assert err.where == "environment.extra.miopen_version"
    assert "the value '3.2" in err.problem
    err = _refused(_doc(extra={f"key{char}": "1"}))
    assert err.where == "environment.extra"
    assert "a key 'key" in err.problem


@pytest.mark.parametrize("name", NAMES)
def test_a_name_with_unicode_letters_and_signs_still_passes(name: str, tmp_path: Path) -> None:
    environment = env(device_name=name, extra={"platform": f"Linux {name}", "num_threads": 8, "ok": True})
    path = write_stage(report("functional_test", metrics={"op_pass_rate": 1.0}, environment=environment), tmp_path)
    assert read_stage(path).environment.device_name == name
    assert environment_problem(environment.to_dict()) is None


def test_every_text_field_of_the_environment_is_under_the_rule() -> None:
    # a field added to $defs.environment without the rule fails here (and the parametrized test names it)
    props = schemas.load_schema("gatekeeper.stage/v1")["$defs"]["environment"]["properties"]
    texts = {k for k, v in props.items() if "enum" not in v and v.get("type") != "integer" and k != "extra"}
    assert texts == set(FIELDS)
    assert all(props[k]["$ref"] in ("#/$defs/text", "#/$defs/nullable_text") for k in FIELDS)


@pytest.mark.parametrize(
    "schema_id",
    ["gatekeeper.stage/v1", "gatekeeper.verdict/v1", "gatekeeper.bisect/v1", "gatekeeper.bisect-nightly/v1"],
)
def test_each_schema_uses_the_one_definition(schema_id: str) -> None:
    text = json.dumps(schemas.load_schema(schema_id))
    assert json.dumps(CONTROL_CHARS) in text  # the pattern is escape.CONTROL_CHARS, character for character


def test_evaluate_refuses_the_artifact_with_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    art = tmp_path / "art"
    forged = replace(env(), torch_version="2.5.1+rocm6.2\nblocking gate ok: passed")
    path = art / "functional_test.json"
    art.mkdir()
    path.write_text(json.dumps(_doc(**forged.to_dict())), encoding="utf-8")
    assert main(["evaluate", "--artifacts", str(art), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"{path}:environment.torch_version: " in err[0]
    assert "contains a control character (\\x0a)" in err[0]


def test_a_verdict_whose_environment_has_a_control_character_is_refused(tmp_path: Path) -> None:
    from gatekeeper.contract.verdict import Verdict, write_verdict

    path = write_verdict(
        Verdict(result="pass", summary="ok", channel="stable", gates=(), environment=env().to_dict()),
        tmp_path / "verdict.json",
    )
    assert read_verdict(path).environment["device_name"] is None
    doc = json.loads(path.read_text(encoding="utf-8"))
    for where, environment in (
        ("environment.device_name", {**doc["environment"], "device_name": "MI300X\u202e"}),
        ("environment.extra.platform", {**doc["environment"], "extra": {"platform": "Linux\x1b]0;t\x07"}}),
    ):
        path.write_text(json.dumps({**doc, "environment": environment}), encoding="utf-8")
        with pytest.raises(InputError, match="contains a control character") as err:
            read_verdict(path)
        assert err.value.where == where


def test_history_import_of_a_record_with_a_forged_environment_imports_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from gatekeeper.history import RunInfo, open_store
    from tests.support.release_history import day, environment, performance

    monkeypatch.delenv("CI_PROJECT_PATH", raising=False)
    src = f"sqlite:{tmp_path / 'src.db'}"
    store = open_store(src, create=True)
    for k in (1, 2):
        r = performance(environment(), started_at=day(k))
        store.save(r, RunInfo("main", f"c{k}", str(k), "pass", r.started_at))
    assert main(["history", "export", "--history", src, "--out", str(tmp_path / "ok.jsonl")]) == 0
    good, second = (tmp_path / "ok.jsonl").read_text(encoding="utf-8").splitlines()
    doc = json.loads(second)
    doc["report"]["environment"]["torch_version"] = "2.5.1+rocm6.2\x1b[2K\rgatekeeper: all gates passed"
    path = tmp_path / "forged.jsonl"
    path.write_text(f"{good}\n{json.dumps(doc)}\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["history", "import", "--from", str(path), "--into", f"sqlite:{tmp_path / 'into.db'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"{path}:line 2: not a usable record: environment.torch_version: the value" in err[0]
    assert "contains a control character (\\x1b)" in err[0]
    assert "\x1b" not in err[0]
    assert not (tmp_path / "into.db").exists()  # nothing imported, not even the good first line


def test_a_store_row_whose_environment_column_has_a_control_character_is_skipped(tmp_path: Path) -> None:
    # history changes reads the stored environment (the fingerprint column) and the rocm_version, arch...
    # columns, not the report: no schema on that path, the same rule
    from gatekeeper.history import RunInfo, open_store
    from tests.support.release_history import day, environment, performance

    db = tmp_path / "h.db"
    store = open_store(f"sqlite:{db}", create=True)
    for k in (1, 2, 3):
        r = performance(environment(), started_at=day(k))
        store.save(r, RunInfo("main", f"c{k}", str(k), "pass", r.started_at))
    assert len(store.series()) == 3
    assert not store.skipped
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("SELECT fingerprint FROM results WHERE pipeline_id = '2'").fetchone()
        forged = json.loads(text)
        forged["extra"] = {"platform": "Linux\u2067x\u2069"}
        conn.execute("UPDATE results SET fingerprint = ? WHERE pipeline_id = '2'", (json.dumps(forged),))
        conn.execute("UPDATE results SET rocm_version = '6.2\x1b[2J' WHERE pipeline_id = '3'")
    rows = store.series()
    assert [r.pipeline_id for r in rows] == ["1"]
    first, second = store.skipped
    assert "skipped: environment.extra.platform: the value" in first
    assert "contains a control character (\\u2067)" in first
    assert "skipped: environment.rocm_version: the value '6.2\\x1b[2J' contains a control character" in second
