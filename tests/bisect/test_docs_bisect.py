"""docs/release.md's bisection from a red nightly to the culprit and its issue, run as it is written there:
a repository whose commit 31 of 40 breaks an operator numerically, found by the exit code of a command."""

from __future__ import annotations

import math
import os
import sys

import pytest

from gatekeeper import cli
from gatekeeper.contract.bisect_report import read_bisect
from gatekeeper.notify.issue import parse_marker
from tests.bisect.builders import broken_op_repo, commit_number
from tests.bisect.docs import documented
from tests.bisect.test_notify_issue import TOKEN, FakeGitLab
from tests.support.fake_http import FakeServer


@pytest.mark.slow
def test_the_documented_bisection_names_the_commit_that_broke_the_operator_and_files_its_issue(
    tmp_path, monkeypatch, capsys
):
    repo = broken_op_repo(tmp_path / "model", n=40, broken_from=31)
    repo.create_tag("nightly-green", ref=repo.commit("HEAD~39"))
    repo.create_tag("nightly-red", ref=repo.commit("HEAD"))
    monkeypatch.chdir(tmp_path / "model")
    # "python" in the documented command is this test's Python (the one with torch)
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")
    bisect, notify = documented("bisect-command")
    assert bisect[-2:] == ["python", "check_ops.py"]
    code = cli.main(bisect)
    printed = capsys.readouterr().out
    assert code == 0, printed
    doc = read_bisect(tmp_path / "model" / "bisect" / "bisect.json")
    first_bad = doc["candidates"][doc["result"]["first_bad"]]
    assert commit_number(repo, first_bad["ref"]) == 31
    assert commit_number(repo, doc["candidates"][doc["result"]["last_good"]]["ref"]) == 30
    assert first_bad["decisions"][-1]["reason"] == "the command exited with 1"
    assert doc["summary"]["run"] <= math.ceil(math.log2(40)) + 2
    assert f"{doc['summary']['run']} of 40 candidates run (at most 8 on a clean range)" in printed
    assert "first bad: " + first_bad["ref"] in printed
    gl = FakeGitLab()
    with FakeServer(route=gl.route) as srv:
        monkeypatch.setenv("CI_API_V4_URL", f"{srv.url}/api/v4")
        monkeypatch.setenv("GATEKEEPER_GITLAB_TOKEN", TOKEN)
        monkeypatch.setenv("CI_PROJECT_ID", "42")
        assert cli.main(notify) == 0
    (issue,) = gl.issues
    assert parse_marker(issue["description"])["culprit"] == f"git:{first_bad['ref']}"
    assert "commit 31" in issue["description"]
    assert "created issue #1" in capsys.readouterr().err


def test_the_readme_shows_the_documented_commands():
    import re
    import shlex

    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"### `gatekeeper bisect`.*?```sh\n(.*?)\n```", readme, re.S)
    assert block is not None
    shown = [shlex.split(line)[1:] for line in block.group(1).splitlines()]
    assert shown == documented("bisect-command")  # the same commands the test above runs
