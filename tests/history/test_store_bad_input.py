"""A history store that cannot be used: one line naming the store and the fix, exit 2, nothing lost.
Against the session's real PostgreSQL server (a wrong password, a port where nothing listens) and sqlite."""

from __future__ import annotations

import json
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
