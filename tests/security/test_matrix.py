"""The hostile-input matrix (docs/security.md, "The hostile-input matrix"): every command that reads files,
every input it reads, every mutation class of tests/security/mutations.py; each case checks the invariants
of tests/security/matrix.py (``problems``): the documented exit code (never 70), no raw control character on
the terminal, no planted secret in any file written, no unescaped markup in any rendered output or message,
nothing sent to a target other than the job's, and (for the size classes, run in forked children) peak memory
under a stated bound.

``make fuzz`` runs the same matrix with hypothesis drawing the payloads and with bigger files.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gatekeeper.core import proc
from tests.security import matrix as M
from tests.security import mutations as m
from tests.support.fake_http import FakeServer, Reply, Seen, refused_url

FUZZ = os.environ.get("GATEKEEPER_FUZZ") == "1"  # read at import: conftest clears GATEKEEPER_* in each test
FUZZ_EXAMPLES = int(os.environ.get("GATEKEEPER_FUZZ_EXAMPLES", "25"))

# Cases that fail today because of a finding of issue 23 not fixed yet (none now). strict: when a fix merges the
# case passes, the xfail turns into a failure, and whoever merges removes the line.
XFAIL: dict[tuple[str, str, str], str] = {}


ISSUES: list[dict[str, Any]] = []  # the regression issues GitLab lists as the bot's (M.open_issues of the world)


def _route(seen: Seen) -> Reply:
    if seen.path == M.HOOK_PATH:
        return Reply(200, "ok")
    if seen.path.endswith("/user"):
        return Reply(200, {"id": 1, "username": "gatekeeper-bot"})
    if seen.method == "GET" and seen.path.split("?")[0].endswith("/issues"):
        return Reply(200, ISSUES)
    if seen.method == "GET":
        return Reply(200, [])
    return Reply(201, {"id": 5, "iid": 13})


@pytest.fixture(scope="module")
def server() -> Any:
    with FakeServer(route=_route) as srv:
        yield srv


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, server: FakeServer) -> Path:
    template = tmp_path_factory.mktemp("matrix") / "template"
    M.build_world(template, server.url, refused_url())
    ISSUES[:] = M.open_issues(template)
    return template


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One newline-free file, hard-linked into every case that needs one."""
    path = tmp_path_factory.mktemp("pool") / "newline-free"
    m.newline_free(path)
    return path


def _param(command: str, name: str, cls: str) -> Any:
    reason = XFAIL.get((command, name, cls))
    marks = [pytest.mark.xfail(strict=True, reason=f"issue 23: {reason}")] if reason else []
    return pytest.param(command, name, cls, marks=marks, id=f"{command}|{name}|{cls}")


IN_PROCESS = [c for c in M.cases() if c[2] not in M.DRIVER_CLASSES]
IN_CHILDREN = [c for c in M.cases() if c[2] in M.DRIVER_CLASSES]


def _argv(command: str, root: Path) -> list[str]:
    return [a.replace("{root}", str(root)) for a in M.COMMANDS[command].argv]


def _run_in_process(
    command: str, root: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> M.Outcome:
    from gatekeeper.cli import main

    for key, value in M.job_env(server.url).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(root / M.COMMANDS[command].cwd)
    before = M.snapshot(root)
    capsys.readouterr()
    server.seen.clear()
    code = main(_argv(command, root))
    captured = capsys.readouterr()
    return M.Outcome(code, captured.out, captured.err, M.written_since(root, before), list(server.seen))


def _case(tmp: Path, command: str, name: str, cls: str, payload: Any, world: Path, pool: Path) -> Path:
    root = tmp / "w"
    M.make_case_world(world, root, command, name)
    if cls != M.CONTROL_CASE:
        M.mutate(root, command, name, cls, payload, pool)
    return root


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("command", "name", "cls"), [_param(*c) for c in IN_PROCESS])
def test_matrix(
    command: str, name: str, cls: str, world: Path, pool: Path, server: FakeServer, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    root = _case(tmp_path, command, name, cls, M.payload_of(cls) if cls != M.CONTROL_CASE else None, world, pool)
    outcome = _run_in_process(command, root, server, monkeypatch, capsys)
    assert M.problems(command, name, cls, outcome, root) == []


# ------------------------------------------------------------------ the size classes, in forked children


@pytest.fixture(scope="module")
def children(
    world: Path, pool: Path, server: FakeServer, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, M.Outcome]]:
    """Every size-class case run by one driver process (tests/security/matrix_driver.py), one fork each."""
    base = tmp_path_factory.mktemp("children")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("CI_", "GATEKEEPER_"))}}
    env |= M.job_env(server.url) | {"PYTHONPATH": str(M.REPO)}
    todo, roots, befores = [], {}, {}
    for n, (command, name, cls) in enumerate(IN_CHILDREN):
        case_id = f"{command}|{name}|{cls}"
        root = _case(base / f"c{n}", command, name, cls, None, world, pool)
        roots[case_id], befores[case_id] = root, M.snapshot(root)
        todo.append({"id": case_id, "argv": _argv(command, root), "cwd": str(root / M.COMMANDS[command].cwd), "env": env,
                     "out": str(base / f"c{n}" / "stdout"), "err": str(base / f"c{n}" / "stderr")})  # fmt: skip
    (base / "cases.json").write_text(json.dumps(todo), encoding="utf-8")
    server.seen.clear()
    res = proc.run(
        [sys.executable, "-m", "tests.security.matrix_driver", str(base / "cases.json"), str(base / "results.json")],
        timeout=3000, cwd=M.REPO, env=env,
    )  # fmt: skip
    assert res.ok, res.describe() + res.stderr[-3000:]
    results = json.loads((base / "results.json").read_text(encoding="utf-8"))
    sent = list(server.seen)
    out = {}
    for n, (command, name, cls) in enumerate(IN_CHILDREN):
        case_id = f"{command}|{name}|{cls}"
        r = results[case_id]
        stream = lambda which, n=n: (base / f"c{n}" / which).read_text(encoding="utf-8", errors="replace")  # noqa: E731
        outcome = M.Outcome(
            r["code"], stream("stdout"), stream("stderr"), M.written_since(roots[case_id], befores[case_id]),
            [s for s in sent if M.COMMANDS[command].sends], r["peak_mib"],
        )  # fmt: skip
        out[case_id] = (roots[case_id], outcome)
    return out


@pytest.mark.parametrize(("command", "name", "cls"), [_param(*c) for c in IN_CHILDREN])
def test_matrix_sizes(command: str, name: str, cls: str, children: dict[str, tuple[Path, M.Outcome]]) -> None:
    root, outcome = children[f"{command}|{name}|{cls}"]
    assert M.problems(command, name, cls, outcome, root) == []


# ------------------------------------------------------------------ the matrix itself


def test_every_cell_is_a_case_or_says_why_not() -> None:
    for command, cmd in M.COMMANDS.items():
        for name in cmd.inputs:
            assert name in M.INPUTS, name
            assert name in M.POLICY, name
            for cls in m.CLASSES:
                got = M.cell(command, name, cls)
                assert isinstance(got, str) or (command, name, cls) in M.cases(), (command, name, cls)
    for key in XFAIL:
        assert key in M.cases(), f"XFAIL names no case: {key}"


def _cli_commands() -> list[str]:
    """Every command of gatekeeper's CLI down to its subcommands ("history import"), as argparse builds it."""
    import argparse

    from gatekeeper.cli import build_parser

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> list[str]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        out = [" ".join(path)] if path and not any(s.required for s in subs) else []
        for sub in subs:
            for name, child in sub.choices.items():
                out += walk(child, (*path, name))
        return out

    return walk(build_parser(), ())


def test_every_command_of_the_cli_is_in_the_matrix_or_says_why_not() -> None:
    # A command added later (as history, notify issue and bisect were) fails here until it has its cases.
    commands = _cli_commands()
    assert "history import" in commands
    assert "notify issue" in commands
    for command in commands:
        words = command.split()
        covered = any(list(cmd.argv[: len(words)]) == words for cmd in M.COMMANDS.values())
        assert covered or command in M.UNCOVERED, f"gatekeeper {command}: add it to COMMANDS, or to UNCOVERED with why"
    for key in M.UNCOVERED:
        assert key.split(":")[0] in commands, f"UNCOVERED names no command: {key}"


if FUZZ:
    _FUZZED = [c for c in IN_PROCESS if c[2] in m.CLASSES and m.CLASSES[c[2]].variants is not None]

    @pytest.mark.parametrize(("command", "name", "cls"), [_param(*c) for c in _FUZZED])
    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def test_matrix_fuzz(
        command: str, name: str, cls: str, data: st.DataObject, world: Path, pool: Path, server: FakeServer,
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
    ) -> None:  # fmt: skip
        variants = m.CLASSES[cls].variants
        assert variants is not None
        payload = data.draw(variants, label="payload")
        root = _case(tmp_path_factory.mktemp("fuzz"), command, name, cls, payload, world, pool)
        from gatekeeper.cli import main

        for key, value in M.job_env(server.url).items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(root / M.COMMANDS[command].cwd)
        before = M.snapshot(root)
        server.seen.clear()
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(_argv(command, root))
        outcome = M.Outcome(code, out.getvalue(), err.getvalue(), M.written_since(root, before), list(server.seen))
        assert M.problems(command, name, cls, outcome, root) == []
