"""MR note updated in place, commit status, missing token, spool and resend: against a local GitLab fake."""

from __future__ import annotations

import json
import re

from gatekeeper.notify import notify_gitlab, resend
from gatekeeper.notify.gitlab_note import MARKER, STATUS_NAME
from tests.support.fake_http import FakeServer, Reply, Seen
from tests.support.notify_inputs import job_env, write_analysis, write_verdict

TOKEN = "glpat-SECRETsecretSECRET1234"
SPOOL_KEY = "spool-key-SECRET-0123456789abcdef"
MR = {"pipeline_source": "merge_request_event", "mr_iid": "7", "target_branch": "main", "ref": "feature/x"}


class FakeGitLab:
    """Keeps the notes of MR !7 of project 42 like GitLab does."""

    def __init__(self) -> None:
        self.notes = [{"id": 1, "body": "LGTM"}]

    def route(self, seen: Seen) -> Reply:
        path = seen.path.split("?")[0]
        if path == "/api/v4/user":
            return Reply(200, {"id": 5, "username": "project_42_bot"})
        if path == "/api/v4/projects/42/merge_requests/7/notes":
            if seen.method == "GET":
                return Reply(200, list(reversed(self.notes)))
            note = {"id": 100 + len(self.notes), "body": seen.json()["body"], "author": {"id": 5}}
            self.notes.append(note)
            return Reply(201, note)
        m = re.fullmatch(r"/api/v4/projects/42/merge_requests/7/notes/(\d+)", path)
        if m and seen.method == "PUT":
            note = next(n for n in self.notes if n["id"] == int(m.group(1)))
            note["body"] = seen.json()["body"]
            return Reply(200, note)
        if path.startswith("/api/v4/projects/42/statuses/") and seen.method == "POST":
            return Reply(201, {"id": 9, **seen.json()})
        return Reply(404, {"message": "404 Not Found"})


def _env(url: str, context: dict | None = None) -> dict[str, str]:
    """A job of the pipeline the verdict was computed in (``context``), in project 42."""
    return {
        **job_env(context),
        "CI_API_V4_URL": f"{url}/api/v4",
        "GATEKEEPER_GITLAB_TOKEN": TOKEN,
        "CI_PROJECT_ID": "42",
        "GATEKEEPER_SPOOL_KEY": SPOOL_KEY,
    }


def test_note_is_created_once_then_updated_in_place_and_status_is_set(tmp_path):
    gl = FakeGitLab()
    lines: list[str] = []
    with FakeServer(route=gl.route) as srv:
        for _ in range(2):
            verdict = write_verdict(tmp_path, context=MR)
            assert (
                notify_gitlab(
                    verdict=verdict,
                    analysis=write_analysis(tmp_path),
                    environ=_env(srv.url, MR),
                    log=lines.append,
                    spool_dir=tmp_path / "alerts",
                )
                == 0
            )
    ours = [n for n in gl.notes if MARKER in n["body"]]
    assert len(ours) == 1
    assert "| gate | outcome |" in ours[0]["body"]
    assert "Failure analysis: `device_oom`" in ours[0]["body"]
    assert lines[0] == "gatekeeper: notify gitlab: created note 101 on !7"
    assert lines[2] == "gatekeeper: notify gitlab: updated note 101 on !7"
    statuses = [s for s in srv.seen if "/statuses/" in s.path]
    assert len(statuses) == 2
    assert statuses[0].path.endswith("/statuses/0123456789abcdef0123456789abcdef01234567")
    body = statuses[0].json()
    assert (body["state"], body["name"]) == ("failed", STATUS_NAME)
    assert body["target_url"] == "https://gitlab.example.com/ml/model/-/pipelines/991"
    assert all(s.headers["PRIVATE-TOKEN"] == TOKEN for s in srv.seen)


def test_passing_verdict_sets_success(tmp_path):
    with FakeServer(route=FakeGitLab().route) as srv:
        notify_gitlab(verdict=write_verdict(tmp_path, result="pass"), environ=_env(srv.url), log=lambda _: None)
    (status,) = [s.json() for s in srv.seen if "/statuses/" in s.path]
    assert status["state"] == "success"


def test_without_token_says_so_once_and_carries_on(tmp_path):
    lines: list[str] = []
    env = {"CI_API_V4_URL": "http://127.0.0.1:9/api/v4", "CI_JOB_TOKEN": "job-token-value", "CI_PROJECT_ID": "42"}
    assert notify_gitlab(verdict=write_verdict(tmp_path, context=MR), environ=env, log=lines.append) == 0
    assert len(lines) == 1
    assert "GATEKEEPER_GITLAB_TOKEN" in lines[0]
    assert "CI_JOB_TOKEN cannot write them" in lines[0]


def test_final_failure_is_spooled_redacted_and_resent_later(tmp_path, capsys):
    lines: list[str] = []
    spool_dir = tmp_path / "alerts"
    with FakeServer(default=Reply(503, f"maintenance for {TOKEN}")) as srv:
        env = _env(srv.url, MR)
        assert (
            notify_gitlab(
                verdict=write_verdict(tmp_path, context=MR),
                environ=env,
                log=lines.append,
                spool_dir=spool_dir,
                retries=1,
            )
            == 0
        )
    paths = [s.path.split("?")[0] for s in srv.seen]
    assert all(paths.count(p) == 2 for p in paths)  # one retry on 503, for every call
    (entry,) = (spool_dir / "pending").glob("*-gitlab-*.json")
    doc = json.loads(entry.read_text())
    assert doc["data"]["target"]["mr_iid"] == "7"
    assert doc["data"]["verdict"]["result"] == "blocked"
    everything = "".join(lines) + capsys.readouterr().err + entry.read_text()
    assert TOKEN not in everything
    assert SPOOL_KEY not in everything
    assert "spooled to" in lines[-1]
    gl = FakeGitLab()
    with FakeServer(route=gl.route) as srv:
        assert resend(spool_dir=spool_dir, environ=_env(srv.url, MR), log=lines.append) == 0
    assert lines[-1] == "gatekeeper: notify --resend: 1 sent, 0 still pending, 0 quarantined"
    assert [n for n in gl.notes if MARKER in n["body"]]
    assert not list((spool_dir / "pending").glob("*.json"))


def test_cli_wiring(tmp_path, capsys):
    from gatekeeper.cli import main

    verdict = write_verdict(tmp_path, context=MR)
    assert main(["notify", "gitlab", "--verdict", str(verdict)]) == 0
    assert main(["notify", "--resend", "--spool", str(tmp_path / "alerts")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert "GATEKEEPER_GITLAB_TOKEN or CI_API_V4_URL not set" in err[0]
    assert err[1] == (
        "gatekeeper: notify --resend: 0 sent, 0 pending, 0 quarantined: GATEKEEPER_SPOOL_KEY is not set, "
        "and a message is sent only when its signature can be checked"
    )
    assert main(["notify", "gitlab", "--verdict", str(tmp_path / "missing.json")]) == 2
