"""A history store that cannot be used: one line naming the store and the fix, exit 2, nothing lost.
Against the session's real PostgreSQL server (a wrong password, a port where nothing listens) and sqlite."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.contract.stage_report import write_stage
from gatekeeper.core.errors import InputError
from gatekeeper.history import open_store
from tests.support.builders import report
from tests.support.postgres import PASSWORD, USER, Server, _free_port, new_database


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_wrong_password_names_the_store_and_the_fix_and_never_the_password(
    postgres_server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    db = new_database(postgres_server)
    wrong = f"postgresql://{USER}:not-{PASSWORD}@{postgres_server.host}:{postgres_server.port}/{db}"
    assert main(["history", "changes", "--history", wrong]) == 2
    line = _one_line(capsys)
    # the store names itself with the password as ***; the CLI's redactor then hides the whole credential
    assert line.startswith("gatekeeper: postgresql://")
    assert f"@{postgres_server.host}:{postgres_server.port}/{db}: cannot log in" in line
    assert "cannot log in: the server refused the password" in line
    assert "hint: set PGPASSWORD (a masked CI variable) or a ~/.pgpass entry" in line
    assert PASSWORD not in line


def test_an_unreachable_store_names_it_and_says_what_to_check(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"postgresql://{USER}@127.0.0.1:{_free_port()}/nowhere"
    with pytest.raises(InputError, match="cannot reach the history store"):
        open_store(url)
    assert main(["history", "anchor", "--history", url]) == 2
    line = _one_line(capsys)
    assert line.startswith(f"gatekeeper: {url}: cannot reach the history store")
    assert "hint: check host, port and that the server is up (pg_isready)" in line


def _gates(tmp_path: Path) -> Path:
    path = tmp_path / "g.yaml"
    path.write_text("version: 1\ngates:\n  cov:\n    metric: functional_test.op_pass_rate\n    pass: '>= 0.9'\n")
    return path


def test_a_run_that_cannot_be_recorded_is_spooled_and_imported_later(
    postgres_server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    monkeypatch.setenv("CI_PIPELINE_ID", "77")
    write_stage(report("functional_test", {"op_pass_rate": 0.99}), tmp_path / "artifacts")
    down = f"postgresql://{USER}@127.0.0.1:{_free_port()}/history"
    code = main(["evaluate", "--gates", str(_gates(tmp_path)), "--record", down])
    assert code == 2
    line = _one_line(capsys)
    assert line.startswith(f"gatekeeper: {down}: could not record this run (tried twice: ")
    spool = tmp_path / "artifacts" / "history-spool.jsonl"
    assert f"its 1 records are spooled in {spool.relative_to(tmp_path)}" in line
    assert f"hint: once the store is back: gatekeeper history import --from {spool.relative_to(tmp_path)}" in line
    assert json.loads((tmp_path / "artifacts" / "verdict.json").read_text())["result"] == "pass"  # the verdict stands
    [record] = [json.loads(x) for x in spool.read_text().splitlines()]
    assert record["info"]["pipeline_id"] == "77"
    assert record["report"]["stage"] == "functional_test"
    up = postgres_server.url(new_database(postgres_server))
    assert main(["history", "import", "--from", str(spool), "--into", up]) == 0
    assert "imported 1 records and 0 anchors" in capsys.readouterr().out
    [(info, rep)] = open_store(up).history("functional_test")
    assert (info.pipeline_id, rep.metrics["op_pass_rate"].value) == ("77", 0.99)


def test_a_corrupt_sqlite_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "h.db").write_bytes(b"not a database at all" * 200)
    assert main(["history", "changes", "--history", f"sqlite:{tmp_path / 'h.db'}"]) == 2
    line = _one_line(capsys)
    assert f"{tmp_path / 'h.db'}: not a usable history database" in line
    assert "hint: point sqlite: at a gatekeeper store" in line


def test_without_a_server_the_postgres_tests_skip_or_with_required_tools_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import postgres

    monkeypatch.setattr(postgres, "_binaries", lambda: None)
    monkeypatch.setattr(postgres, "REQUIRED", False)
    with pytest.raises(pytest.skip.Exception, match=r"no PostgreSQL server .*scripts/setup_postgres\.sh"):
        postgres.require()
    monkeypatch.setattr(postgres, "REQUIRED", True)
    with pytest.raises(pytest.fail.Exception, match="GATEKEEPER_REQUIRE_TOOLS=1 but no PostgreSQL server"):
        postgres.require()


def _exported(tmp_path: Path, stack: dict[str, str] | None = None) -> str:
    """One record of a real sqlite store, exported: its JSON line."""
    from gatekeeper.history import RunInfo
    from gatekeeper.history.transfer import export_records
    from tests.support.release_history import day, environment, performance

    spec = f"sqlite:{tmp_path / 'src.db'}"
    store = open_store(spec, create=True)
    r = performance(environment(), started_at=day(1))
    store.save(r, RunInfo("main", "c0", "1", "pass", r.started_at, stack=stack))
    export_records(spec, tmp_path / "ok.jsonl")
    return (tmp_path / "ok.jsonl").read_text(encoding="utf-8").splitlines()[0]


def test_an_import_line_is_read_by_the_strict_json_reader_and_a_bad_one_imports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 23 matrix (history import of a hostile export): a duplicated key was imported with the decoy dropped,
    # bytes that are not UTF-8 and brackets nested 5,000 deep were exit 70
    line = _exported(tmp_path)
    doc = json.loads(line)
    doc["report"]["duration_s"] = "__huge__"
    cases = {
        "dup": ('{"schema": "decoy", ' + line[1:], "duplicate key 'schema'"),
        "bytes": (b"\xff\xfe\x00garbage\n", "not UTF-8 text"),
        "deep": ("[" * 5000 + "]" * 5000, "JSON nested too deeply"),
        "huge": (json.dumps(doc).replace('"__huge__"', "9" * 400), "report.duration_s is an integer of about 400"),
        "ref": (line.replace('"ref": "main"', '"ref": 5'), "info.ref is not a string"),
    }
    for name, (text, problem) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        assert main(["history", "import", "--from", str(path), "--into", f"sqlite:{tmp_path / name}.db"]) == 2
        err = _one_line(capsys)
        assert re.search(rf"{name}\.jsonl:line 1(, column \d+)?: ", err), err  # the column when JSON names one
        assert problem in err, err
        assert not (tmp_path / f"{name}.db").exists()  # nothing imported, no store created


def test_an_import_line_of_another_project_is_refused_in_a_job_of_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 23 matrix (history import, a spool line that names another project): the record was filed under that
    # project in a shared store (its baselines, its anchors); the job's project decides (docs/security.md)
    monkeypatch.delenv("CI_PROJECT_PATH", raising=False)
    line = _exported(tmp_path, stack={"gatekeeper": "1", "project": "other/project"})
    (tmp_path / "spool.jsonl").write_text(line + "\n", encoding="utf-8")
    monkeypatch.setenv("CI_PROJECT_PATH", "ml/model")
    assert (
        main(["history", "import", "--from", str(tmp_path / "spool.jsonl"), "--into", f"sqlite:{tmp_path / 'a.db'}"])
        == 2
    )
    err = _one_line(capsys)
    assert "spool.jsonl:line 1: a record of project 'other/project', this job is in project 'ml/model'" in err
    assert not (tmp_path / "a.db").exists()
    monkeypatch.delenv("CI_PROJECT_PATH")  # outside CI (moving a team's history by hand) it keeps its project
    assert (
        main(["history", "import", "--from", str(tmp_path / "spool.jsonl"), "--into", f"sqlite:{tmp_path / 'b.db'}"])
        == 0
    )


def test_a_secret_in_a_record_never_reaches_the_store_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 23 matrix (history import of a line with secret shapes in a check message): the store file held them;
    # every string a store writes is redacted, as write_json redacts a JSON file (evaluate --record too)
    from dataclasses import replace

    from gatekeeper.contract.stage_report import Check
    from gatekeeper.history import RunInfo
    from tests.support.release_history import day, environment, performance

    secret = "export DB_PASSWORD=Pw-db-9f3k2j1h7g {'Authorization': 'Bearer Bearer-hdr-5t7y9u1i3o'}"
    # the torch version is a column too (2026-12-04 audit: the matrix's secret case found it written whole)
    r = performance(environment(torch=f"2.6.0 {secret}", arch=f"gfx90a {secret}"), started_at=day(1))
    r = replace(r, checks=(Check("timing", "failed", secret),), config={**r.config, "note": secret})
    store = open_store(f"sqlite:{tmp_path / 's.db'}", create=True)
    store.save(r, RunInfo("main", "c0", "1", "pass", r.started_at, stack={"image": secret}))
    store.set_anchor("1", by=secret, reason=secret)  # an imported anchor line's, or --by/--reason
    data = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
    for value in ("Pw-db-9f3k2j1h7g", "Bearer-hdr-5t7y9u1i3o"):
        assert value.encode() not in data
    [(_, back)] = store.history("performance_baseline")
    assert back.checks[0].message.startswith("export DB_PASSWORD=")  # the rest of the record as it was
    assert back.metrics["latency_ms"].value == r.metrics["latency_ms"].value


def test_an_import_line_cannot_make_itself_the_newest_record_or_anchor_by_its_own_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 2026-12-04 audit (a file believed about itself): stores order by recorded_at/set_at as text, and an import
    # took each line's time as it was. A record claiming 9999-12-31 (or "z", or 23:59+14:00, later as text than
    # an earlier UTC time) was every later run's baseline, and such an anchor outranked every one set after it.
    from gatekeeper.history import RunInfo
    from tests.support.release_history import day, environment, performance

    monkeypatch.delenv("CI_PROJECT_PATH", raising=False)
    line = _exported(tmp_path)
    doc = json.loads(line)
    assert doc["info"]["recorded_at"] == day(1)
    anchor = {"schema": "gatekeeper.history-anchor/v1", "run": "1", "set_by": "ann", "reason": "why"}
    cases = {
        "future": (
            {**doc, "info": {**doc["info"], "recorded_at": "9999-12-31T00:00:00+00:00"}},
            "is later than this job's clock",
        ),
        "text": ({**doc, "info": {**doc["info"], "recorded_at": "zzz"}}, "not an ISO 8601 time"),
        "naive": ({**doc, "info": {**doc["info"], "recorded_at": "2026-11-01T03:00:00"}}, "has no UTC offset"),
        "none": ({**doc, "info": {**doc["info"], "recorded_at": None}}, "expected an ISO 8601 time"),
        "anchor": ({**anchor, "set_at": "9999-01-01T00:00:00+00:00"}, "line 2: set_at: time '9999-01-01"),
    }
    for name, (bad, problem) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        lines = [line, json.dumps(bad)] if name == "anchor" else [json.dumps(bad)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert main(["history", "import", "--from", str(path), "--into", f"sqlite:{tmp_path / name}.db"]) == 2
        err = _one_line(capsys)
        assert problem in err, err
        assert not (tmp_path / f"{name}.db").exists()  # nothing imported

    # a time with another offset is stored as the store writes its own (UTC), so text order is time order: a
    # record of 2026-11-01 23:59+14:00 (09:59 UTC) is older than one recorded at 10:00 UTC the same day
    into = f"sqlite:{tmp_path / 'ok.db'}"
    store = open_store(into, create=True)
    newer = performance(environment(), started_at="2026-11-01T10:00:00+00:00")
    store.save(newer, RunInfo("main", "c1", "2", "pass", "2026-11-01T10:00:00+00:00"))
    shifted = {**doc, "info": {**doc["info"], "recorded_at": "2026-11-01T23:59:00+14:00"}}
    (tmp_path / "shifted.jsonl").write_text(json.dumps(shifted) + "\n", encoding="utf-8")
    assert main(["history", "import", "--from", str(tmp_path / "shifted.jsonl"), "--into", into]) == 0
    capsys.readouterr()
    times = sorted(info.recorded_at for info, _ in open_store(into).records())
    assert times == ["2026-11-01T09:59:00+00:00", "2026-11-01T10:00:00+00:00"]
    found = open_store(into).latest_record(newer.stage, newer)
    assert found is not None
    assert found[0].pipeline_id == "2"


def test_an_import_file_swapped_for_a_fifo_after_its_check_is_refused_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2026-12-04 audit: read_records checked is_file() and then open()ed the path, so a FIFO swapped in between
    # (here: the check made to answer yes) was opened and read, blocking until a writer came. It now goes
    # through budgets.open_regular (O_NONBLOCK + fstat), the shared reader.
    import os
    import threading

    from gatekeeper.history.transfer import read_records

    fifo = tmp_path / "export.jsonl"
    os.mkfifo(fifo)
    monkeypatch.setattr(Path, "is_file", lambda self: True)

    def writer() -> None:  # a writer that gives the old open() a peer and writes nothing, so the test ends
        os.close(os.open(fifo, os.O_WRONLY))

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        with pytest.raises(InputError, match="found a FIFO"):
            read_records(fifo)
    finally:
        if thread.is_alive():  # the writer is still waiting for a reader: give it one
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        thread.join(timeout=30)
