"""No command exits 70 (internal error) on any input of the hostile corpus: bad input is exit 2 or handled."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.core.exitcodes import ExitCode
from tests.security import corpus

REPO = Path(__file__).resolve().parents[2]


def _stage_dir(root: Path) -> Path:
    art = root / "art"
    art.mkdir()
    (art / "functional_test.json").write_text(json.dumps(corpus.STAGE))
    return art


def _commands(root: Path, kind: str, target: Path) -> list[list[str]]:
    art, out = target.parent, str(root / "out")
    gates = str(REPO / "gates.yaml")
    if kind == "stage":
        return [
            ["evaluate", "--artifacts", str(art), "--gates", gates, "--out", out],
            ["analyze", "--artifacts", str(art), "--format", "md", "--out", str(root / "a.md"),
             "--bundle", str(root / "bundle")],
            ["report", "--artifacts", str(art), "--out", str(root / "r.html")],
            ["breaker", "check", "--channel", "nightly", "--job", "perf", "--state", str(root / "st"),
             "--artifacts", str(art), "--after", "functional_test"],
            ["breaker", "record", "--channel", "nightly", "--job", "functional_test", "--exit-code", "1",
             "--state", str(root / "st"), "--artifacts", str(art)],
        ]  # fmt: skip
    if kind == "log":
        return [["analyze", str(target), "--format", "text", "--out", str(root / "a.txt")]]
    if kind == "yaml":
        return [
            ["evaluate", "--artifacts", str(_stage_dir(root)), "--gates", str(target), "--out", out],
            ["analyze", "--known-issues", str(target), "--format", "json", "--out", str(root / "a.json"),
             str(REPO / "README.md")],
        ]  # fmt: skip
    if kind == "verdict":
        return [
            ["notify", "slack", "--verdict", str(target), "--spool", str(root / "spool")],
            ["notify", "gitlab", "--verdict", str(target), "--spool", str(root / "spool")],
            ["report", "--artifacts", str(art), "--out", str(root / "r.html")],
            ["analyze", "--artifacts", str(art), "--format", "json", "--out", str(root / "a.json")],
        ]
    if kind == "breaker state":
        return [
            ["breaker", "check", "--channel", "nightly", "--job", "perf", "--state", str(art)],
            ["breaker", "record", "--channel", "nightly", "--job", "perf", "--result", "fail", "--state", str(art)],
            ["breaker", "status", "--state", str(art)],
        ]
    if kind == "alert state":
        verdict = root / "v.json"
        from tests.support.notify_inputs import write_verdict

        write_verdict(root, name="v.json")
        return [["notify", "slack", "--verdict", str(verdict), "--state", str(target), "--spool", str(root / "sp")]]
    if kind == "spool":
        return [["notify", "--resend", "--spool", str(root / "spool")]]
    if kind == "capture":
        return [["doctor", "--from", str(art)]]
    raise AssertionError(kind)


def _place(root: Path, kind: str) -> Path:
    where = {
        "stage": "art/zz_stage.json",
        "log": "logs/job.log",
        "yaml": "cfg/gates.yaml",
        "verdict": "art/verdict.json",
        "breaker state": "state/nightly--perf.json",
        "alert state": "alert/state.json",
        "spool": "spool/pending/20261201T000000-slack-0123456789ab.json",
    }
    if kind == "capture":
        return root / "cap" / "tools.json"
    path = root / where[kind]
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind in ("stage", "verdict"):
        (path.parent / "functional_test.json").write_text(json.dumps(corpus.STAGE))
    return path


def _cases() -> list[tuple[str, str, Callable[[Path], None]]]:
    out = [("stage", n, b) for n, b in corpus.STAGE_JSON.items()]
    out += [("log", n, b) for n, b in corpus.LOG.items()]
    out += [("yaml", n, b) for n, b in corpus.YAML.items()]
    out += [("verdict", n, b) for n, b in corpus.VERDICT.items()]
    out += [("breaker state", n, b) for n, b in corpus.STATE.items()]
    out += [("alert state", n, b) for n, b in corpus.STATE.items()]
    out += [("spool", n, b) for n, b in corpus.GENERIC.items()]
    out += [("capture", n, b) for n, b in corpus.GENERIC.items()]
    return out


@pytest.mark.parametrize(("kind", "name", "build"), _cases(), ids=[f"{k}-{n}" for k, n, _ in _cases()])
def test_no_command_exits_70_on_hostile_input(tmp_path, monkeypatch, capsys, kind, name, build):
    monkeypatch.chdir(tmp_path)
    target = _place(tmp_path, kind)
    if kind == "capture":
        target.parent.mkdir(parents=True)
        (target.parent / "rocminfo.txt").write_text(corpus.NASTY)
    build(target)
    for argv in _commands(tmp_path, kind, target):
        code = main(argv)
        err = capsys.readouterr().err
        assert code != ExitCode.INTERNAL_ERROR, f"{argv}: {err}"
        assert "internal error" not in err, f"{argv}: {err}"
        assert "\x1b" not in err
