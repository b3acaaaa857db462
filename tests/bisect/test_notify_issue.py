"""gatekeeper notify issue against a local GitLab fake: create, update, comment, reopen, close, dedup, spool."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from gatekeeper import cli
from gatekeeper.bisect import BisectOptions, run_bisect
from gatekeeper.contract.bisect_report import write_bisect
from gatekeeper.contract.verdict import GateResult, Outcome
from gatekeeper.core.errors import InputError
from gatekeeper.notify import resend
from gatekeeper.notify.issue import LABEL, MARKER, notify_issue, parse_marker
from tests.bisect.builders import make_repo
from tests.support.fake_http import FakeServer, Reply, Seen
from tests.support.notify_inputs import write_verdict

TOKEN = "glpat-SECRETsecretSECRET1234"
HOSTILE = "/close @all <script>alert(1)</script> [x](https://evil.example) #1 !2 | cell ``` /label ~bug"
ENV_BASE = {"CI_PROJECT_ID": "42", "CI_PIPELINE_URL": "https://gitlab.example.com/ml/model/-/pipelines/77"}


class FakeGitLab:
    """The issues of project 42 as GitLab keeps them; the token's user is 5."""

    def __init__(self, *, filter_author: bool = True) -> None:
        self.issues: list[dict[str, Any]] = []
        self.notes: dict[int, list[str]] = {}
        self.filter_author = filter_author  # False: the list also holds other users' issues (the client must check)

    def add(self, description: str, *, author: int = 5, state: str = "opened") -> dict[str, Any]:
        issue = {
            "iid": len(self.issues) + 1,
            "title": "t",
            "description": description,
            "labels": [LABEL],
            "state": state,
            "author": {"id": author},
        }
        self.issues.append(issue)
        return issue

    def route(self, seen: Seen) -> Reply:
        path, _, query = seen.path.partition("?")
        if path == "/api/v4/user":
            return Reply(200, {"id": 5, "username": "project_42_bot"})
        if path == "/api/v4/projects/42/issues" and seen.method == "GET":
            params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
            page = int(params.get("page", "1"))
            found = [i for i in self.issues if LABEL in i["labels"]]
            if "author_id" in params and self.filter_author:
                found = [i for i in found if str(i["author"]["id"]) == params["author_id"]]
            return Reply(200, found if page == 1 else [])
        if path == "/api/v4/projects/42/issues" and seen.method == "POST":
            body = seen.json()
            issue = self.add(body["description"])
            issue.update(title=body["title"], labels=body["labels"].split(","))
            return Reply(201, issue)
        m = re.fullmatch(r"/api/v4/projects/42/issues/(\d+)(/notes)?", path)
        if m:
            issue = next(i for i in self.issues if i["iid"] == int(m.group(1)))
            body = seen.json()
            if m.group(2) and seen.method == "POST":
                self.notes.setdefault(issue["iid"], []).append(body["body"])
                return Reply(201, {"id": 1, "body": body["body"]})
            if seen.method == "PUT":
                if "description" in body:
                    issue["description"] = body["description"]
                event = body.get("state_event")
                if event:
                    issue["state"] = {"close": "closed", "reopen": "opened"}[event]
                return Reply(200, issue)
        return Reply(404, {"message": "404 Not Found"})


def _env(url: str) -> dict[str, str]:
    return {**ENV_BASE, "CI_API_V4_URL": f"{url}/api/v4", "GATEKEEPER_GITLAB_TOKEN": TOKEN}


@pytest.fixture(scope="module")
def bisected(tmp_path_factory) -> Path:
    """A real bisection whose culprit commit has a hostile subject."""
    root = tmp_path_factory.mktemp("notify")
    check = "import sys; sys.exit(1 if int(open('n.txt').read()) >= 5 else 0)\n"
    repo = make_repo(root / "r", 4, lambda i: {"n.txt": str(i), "check.py": check})
    for i in (5, 6):
        (root / "r" / "n.txt").write_text(str(i))
        repo.index.add(["n.txt"])
        repo.index.commit(HOSTILE if i == 5 else f"commit {i}")
    opts = BisectOptions(
        provider="git",
        good="first",
        bad="main",
        out=root / "b",
        command=(sys.executable, "check.py"),
        repo=root / "r",
        bundle=False,
    )
    run_bisect(opts)
    return root / "b" / "bisect.json"


def _with_signature(src: Path, dst: Path, **signature: str) -> Path:
    doc = json.loads(src.read_text())
    doc["result"]["signature"].update(signature)
    write_bisect(dst, doc)
    return dst


def test_creates_one_issue_escaped_then_updates_and_comments(bisected, tmp_path):
    gl = FakeGitLab()
    lines: list[str] = []
    with FakeServer(route=gl.route) as srv:
        assert notify_issue(bisect=bisected, environ=_env(srv.url), log=lines.append, spool_dir=tmp_path / "a") == 0
        assert notify_issue(bisect=bisected, environ=_env(srv.url), log=lines.append, spool_dir=tmp_path / "a") == 0
    assert len(gl.issues) == 1, "the same signature is one issue"
    issue = gl.issues[0]
    assert lines[0] == "gatekeeper: notify issue: created issue #1"
    assert lines[1:] == [
        "gatekeeper: notify issue: updated issue #1",
        "gatekeeper: notify issue: commented on issue #1",
    ]
    text = issue["description"]
    sig = parse_marker(text)
    assert sig is not None
    assert sig["metric"].startswith("command: ")
    assert sig["culprit"].startswith("git:")
    assert "### Bisection" in text
    assert "| # | candidate | decision |" in text
    assert "### What changed" in text
    assert "/pipelines/77" in text
    # the hostile commit subject is shown, never obeyed
    assert "<script>" not in text
    assert "@all" not in text
    assert "](https://evil" not in text
    assert not [line for line in text.splitlines() if line.lstrip().startswith("/")], "a quick action could run"
    assert "&lt;script" in text  # shown as text
    assert "@\u200ball" in text
    assert "Seen again" in gl.notes[1][0]
    assert LABEL in issue["labels"]
    assert "@all" not in issue["title"]


def test_verdicts_comment_while_failing_and_close_on_recovery(bisected, tmp_path):
    doc = _with_signature(
        bisected,
        tmp_path / "stage.json",
        metric="performance_baseline.latency_ms",
        channel="nightly",
        fingerprint="rocm/gfx90a",
    )
    gate = lambda outcome, reason: GateResult("latency-median", outcome, reason, "performance_baseline.latency_ms")  # noqa: E731
    failing = write_verdict(
        tmp_path, channel="nightly", gates=[gate(Outcome.FAIL, "median +21% -> regression")], name="red.json"
    )
    passing = write_verdict(
        tmp_path, result="pass", channel="nightly", gates=[gate(Outcome.PASS, "median +0.4%")], name="green.json"
    )
    stable = write_verdict(
        tmp_path, result="pass", channel="stable", gates=[gate(Outcome.PASS, "fine")], name="st.json"
    )
    gl = FakeGitLab()
    lines: list[str] = []
    with FakeServer(route=gl.route) as srv:
        env = _env(srv.url)
        notify_issue(bisect=doc, environ=env, log=lines.append)
        notify_issue(verdict=stable, environ=env, log=lines.append)  # another channel: not this issue's news
        assert lines[-1] == "gatekeeper: notify issue: no open regression issue matches this verdict"
        notify_issue(verdict=failing, environ=env, log=lines.append)
        assert lines[-1] == "gatekeeper: notify issue: commented on issue #1 (seen again)"
        assert gl.issues[0]["state"] == "opened"
        notify_issue(verdict=passing, environ=env, log=lines.append)
        assert lines[-1] == "gatekeeper: notify issue: closed issue #1 (recovered)"
        assert gl.issues[0]["state"] == "closed"
        assert gl.notes[1][0].startswith("Seen again in")
        assert gl.notes[1][1].startswith("Recovered in")
        # recovered, then bisected to the same culprit again: the same issue is reopened, not a second one
        notify_issue(bisect=doc, environ=env, log=lines.append)
        assert lines[-2:] == [
            "gatekeeper: notify issue: reopened issue #1",
            "gatekeeper: notify issue: commented on issue #1",
        ]
    assert len(gl.issues) == 1
    assert gl.issues[0]["state"] == "opened"
    assert gl.notes[1][-1].startswith("Regressed again")


def test_a_planted_marker_in_someone_elses_issue_is_not_ours(bisected, tmp_path):
    gl = FakeGitLab(filter_author=False)
    with FakeServer(route=gl.route) as srv:
        notify_issue(bisect=bisected, environ=_env(srv.url), log=lambda _: None)
        ours = gl.issues[0]["description"]
        gl.issues[0]["author"] = {"id": 9}  # the same marker, now in an issue another user wrote
        planted = gl.issues[0]
        notify_issue(bisect=bisected, environ=_env(srv.url), log=lambda _: None)
    assert len(gl.issues) == 2
    assert planted["description"] == ours  # never edited
    assert 1 not in gl.notes
    # a marker whose key does not match its fields is no marker
    forged = re.sub(r"regression:([0-9a-f]{16})", "regression:0000000000000000", ours)
    assert parse_marker(forged) is None
    assert MARKER in forged


@pytest.mark.parametrize("blob", [b"[" * 1400, b'{"metric": "a", "metric": "b"}', b"\xff\xfe{}"])
def test_a_marker_the_strict_json_reader_refuses_is_no_marker(blob: bytes) -> None:
    # an issue's description is GitLab's answer, editable by anyone who can edit the issue: brackets nested 1,400
    # deep fit the marker's 2,000 characters and were exit 70 (RecursionError)
    import base64

    data = base64.urlsafe_b64encode(blob).decode().rstrip("=")
    assert parse_marker(f"{MARKER}0123456789abcdef:{data} -->") is None


def test_unreachable_gitlab_spools_data_redacted_and_resend_files_it(bisected, tmp_path):
    spool = tmp_path / "alerts"
    lines: list[str] = []
    env = {**ENV_BASE, "GATEKEEPER_SPOOL_KEY": "k" * 32}
    with FakeServer(default=Reply(503, f"maintenance for {TOKEN}")) as srv:
        environ = {**env, "CI_API_V4_URL": f"{srv.url}/api/v4", "GATEKEEPER_GITLAB_TOKEN": TOKEN}
        assert notify_issue(bisect=bisected, environ=environ, log=lines.append, spool_dir=spool, retries=1) == 0
    (entry,) = (spool / "pending").glob("*-gitlab_issue-*.json")
    stored = json.loads(entry.read_text())
    assert stored["kind"] == "gitlab_issue"
    assert re.fullmatch(r"[0-9a-f]{64}", stored["hmac"]), "signed with GATEKEEPER_SPOOL_KEY"
    assert stored["data"]["target"] == {"project": "42"}, "the target is the job's project"
    payload = stored["data"]["issue"]
    assert payload["action"] == "bisect"
    assert payload["project"] == "42"
    assert "description" not in payload, "the spool keeps data, never rendered text"
    assert TOKEN not in entry.read_text() + "".join(lines)
    assert "spooled to" in lines[-1]
    gl = FakeGitLab()
    with FakeServer(route=gl.route) as srv:
        environ = {**env, "CI_API_V4_URL": f"{srv.url}/api/v4", "GATEKEEPER_GITLAB_TOKEN": TOKEN}
        assert resend(spool_dir=spool, environ=environ, log=lines.append) == 0
    assert lines[-1] == "gatekeeper: notify --resend: 1 sent, 0 still pending, 0 quarantined"
    assert len(gl.issues) == 1
    assert parse_marker(gl.issues[0]["description"]) is not None


def test_a_spooled_issue_for_another_project_is_quarantined_never_filed(bisected, tmp_path):
    spool = tmp_path / "alerts"
    env = {**ENV_BASE, "GATEKEEPER_SPOOL_KEY": "k" * 32}
    with FakeServer(default=Reply(503, "down")) as srv:
        environ = {**env, "CI_API_V4_URL": f"{srv.url}/api/v4", "GATEKEEPER_GITLAB_TOKEN": TOKEN}
        notify_issue(bisect=bisected, environ=environ, log=lambda _: None, spool_dir=spool, retries=1)
    lines: list[str] = []
    gl = FakeGitLab()
    with FakeServer(route=gl.route) as srv:
        environ = {**env, "CI_PROJECT_ID": "43", "CI_API_V4_URL": f"{srv.url}/api/v4", "GATEKEEPER_GITLAB_TOKEN": TOKEN}
        assert resend(spool_dir=spool, environ=environ, log=lines.append) == 0
    assert gl.issues == []
    assert lines[-1] == "gatekeeper: notify --resend: 0 sent, 0 still pending, 1 quarantined"
    assert "for project '42', this job is in project '43': refused" in "\n".join(lines)


def test_cli_wiring_and_bad_input(bisected, tmp_path, capsys, monkeypatch):
    for name in ("GATEKEEPER_GITLAB_TOKEN", "CI_API_V4_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CI_PROJECT_ID", "42")
    assert cli.main(["notify", "issue", "--bisect", str(bisected)]) == 0
    assert "GATEKEEPER_GITLAB_TOKEN or CI_API_V4_URL not set" in capsys.readouterr().err
    assert cli.main(["notify", "issue"]) == 2
    assert "exactly one of --bisect and --verdict" in capsys.readouterr().err
    running = json.loads(bisected.read_text())
    running["status"] = "running"
    write_bisect(tmp_path / "running.json", running)
    assert cli.main(["notify", "issue", "--bisect", str(tmp_path / "running.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "the bisection is running, not done" in err[0]


def test_a_verdict_of_another_pipeline_never_comments_on_or_closes_an_issue(bisected, tmp_path):
    # issue 23 matrix (notify issue --verdict, a verdict whose context names another pipeline): it closed the
    # issue of a regression this pipeline never measured; now it is refused (exit 2) as notify gitlab refuses it
    doc = _with_signature(
        bisected, tmp_path / "stage.json", metric="performance_baseline.latency_ms", channel="nightly",
        fingerprint="rocm/gfx90a",
    )  # fmt: skip
    gate = GateResult("latency-median", Outcome.PASS, "median +0.4%", "performance_baseline.latency_ms")
    old = write_verdict(tmp_path, result="pass", channel="nightly", gates=[gate], context={"pipeline_id": "13"})
    gl = FakeGitLab()
    with FakeServer(route=gl.route) as srv:
        env = {**_env(srv.url), "CI_PIPELINE_ID": "77"}
        notify_issue(bisect=doc, environ=env, log=lambda _line: None)
        seen = len(srv.seen)
        with pytest.raises(InputError, match=r"context\.pipeline_id: the verdict was written in pipeline '13'"):
            notify_issue(verdict=old, environ=env, log=lambda _line: None)
        assert len(srv.seen) == seen  # nothing asked, nothing sent
    assert gl.issues[0]["state"] == "opened"
    assert gl.notes == {}
