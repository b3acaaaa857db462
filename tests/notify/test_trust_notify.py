"""Issue 23, principles 1, 3 and 4 for notify: the merge request, project, commit and pipeline come from the
job, never from the verdict file; spooled messages are signed data, re-rendered when they are sent, and only
ever to the job's own project and merge request."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.notify import notify_gitlab, notify_slack, resend
from gatekeeper.notify.gitlab_note import MARKER
from tests.support.fake_http import FakeServer, Reply, Seen
from tests.support.notify_inputs import write_verdict

TOKEN = "glpat-TrustTestToken01234567"
KEY = "spool-key-0123456789abcdef-protected"
SHA = "0123456789abcdef0123456789abcdef01234567"
MR_CTX = {"pipeline_source": "merge_request_event", "mr_iid": "7", "target_branch": "main", "ref": "feature/x"}
HOSTILE = "/approve\n/merge\n@all <img src=x onerror=alert(1)> <!channel> <!here> <https://evil.example|click>"


def job(url: str, **extra: str) -> dict[str, str]:
    """The diagnose job of pipeline 991 of merge request !7 of project 42, commit SHA."""
    env = {
        "CI_API_V4_URL": f"{url}/api/v4",
        "GATEKEEPER_GITLAB_TOKEN": TOKEN,
        "CI_PROJECT_ID": "42",
        "CI_PROJECT_URL": "https://gitlab.example.com/ml/model",
        "CI_PIPELINE_ID": "991",
        "CI_PIPELINE_URL": "https://gitlab.example.com/ml/model/-/pipelines/991",
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_MERGE_REQUEST_IID": "7",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
        "CI_COMMIT_REF_NAME": "feature/x",
        "CI_COMMIT_SHA": SHA,
        "SLACK_WEBHOOK_URL": f"{url}/services/T0/B0/hook",
    }
    env.update(extra)
    return {k: v for k, v in env.items() if v}


class GitLab:
    """Projects 42 and 999 with their merge requests; records every write."""

    def __init__(self) -> None:
        self.writes: list[Seen] = []

    def route(self, seen: Seen) -> Reply:
        path = seen.path.split("?")[0]
        if path == "/api/v4/user":
            return Reply(200, {"id": 5})
        if seen.method == "GET":
            return Reply(200, [])
        self.writes.append(seen)
        if path.startswith("/services/"):
            return Reply(200, "ok")
        return Reply(201, {"id": 100})


def _verdict(tmp_path: Path, **ctx: object) -> Path:
    return write_verdict(tmp_path, context={**MR_CTX, "pipeline_id": "991", "commit": SHA, **ctx})


# ------------------------------------------------------------------ principle 1 and 3: context from the job


@pytest.mark.parametrize(
    ("ctx", "field", "theirs"),
    [
        ({"pipeline_id": "990"}, "pipeline_id", "990"),  # a verdict left from an earlier pipeline
        ({"pipeline_id": None}, "pipeline_id", "None"),  # one that does not say
        ({"commit": "f" * 40}, "commit", "f" * 40),
        ({"mr_iid": "666"}, "mr_iid", "666"),
        ({"project_url": "https://gitlab.example.com/other/project"}, "project_url", "other/project"),
    ],
)
@pytest.mark.parametrize("target", ["gitlab", "slack"])
def test_a_verdict_that_contradicts_the_job_is_refused_and_nothing_is_sent(
    tmp_path, capsys, monkeypatch, ctx, field, theirs, target
):
    gl = GitLab()
    with FakeServer(route=gl.route) as srv:
        for name, value in job(srv.url).items():
            monkeypatch.setenv(name, value)
        verdict = _verdict(tmp_path, **ctx)
        assert main(["notify", target, "--verdict", str(verdict), "--spool", str(tmp_path / "alerts")]) == 2
    assert gl.writes == []
    err = capsys.readouterr().err
    assert field in err
    assert theirs in err


def test_the_note_and_status_go_to_the_jobs_merge_request_and_commit(tmp_path):
    """A verdict that names none of it still posts where the job is; links are the job's."""
    gl = GitLab()
    verdict = write_verdict(tmp_path, context={"pipeline_id": "991", "commit": None, "ref": None,
                                               "pipeline_url": "https://evil.example/phish"})  # fmt: skip
    with FakeServer(route=gl.route) as srv:
        assert notify_gitlab(verdict=verdict, environ=job(srv.url), log=lambda _: None) == 0
    paths = [s.path for s in gl.writes]
    assert paths == ["/api/v4/projects/42/merge_requests/7/notes", f"/api/v4/projects/42/statuses/{SHA}"]
    note = gl.writes[0].json()["body"]
    assert "evil.example" not in note
    assert "(https://gitlab.example.com/ml/model/-/pipelines/991)" in note
    assert gl.writes[1].json()["target_url"] == "https://gitlab.example.com/ml/model/-/pipelines/991"


# ------------------------------------------------------------------ principle 4: the spool


def _plant(spool: Path, name: str, doc: dict) -> Path:
    path = spool / "pending" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _planted_v1(spool: Path) -> None:
    """What the finding planted: rendered text for any project, MR and SHA, in the old format."""
    _plant(spool, "20260101T000000-gitlab-aaaaaaaaaaaa.json", {
        "schema": "gatekeeper.alert/v1", "kind": "gitlab", "attempts": 1, "last_error": "",
        "payload": {"project": "999", "mr_iid": "1", "sha": "d" * 40, "pipeline_id": "1",
                    "note": HOSTILE, "status": {"state": "success", "name": "gatekeeper/gates"}},
    })  # fmt: skip
    _plant(spool, "20260101T000000-slack-bbbbbbbbbbbb.json", {
        "schema": "gatekeeper.alert/v1", "kind": "slack", "attempts": 1, "last_error": "",
        "payload": {"channel": "#general", "message": {"text": HOSTILE, "blocks": []}},
    })  # fmt: skip


def test_planted_spool_entries_are_quarantined_not_sent(tmp_path):
    spool = tmp_path / "alerts"
    _planted_v1(spool)
    lines: list[str] = []
    gl = GitLab()
    with FakeServer(route=gl.route) as srv:
        assert resend(spool_dir=spool, environ=job(srv.url, GATEKEEPER_SPOOL_KEY=KEY), log=lines.append) == 0
    assert gl.writes == []
    assert not list((spool / "pending").glob("*.json"))
    assert len(list((spool / "quarantine").glob("*.json"))) == 2
    assert "0 sent" in lines[-1]


def _spool_one(tmp_path: Path, env_extra: dict[str, str], verdict: Path | None = None) -> Path:
    """notify gitlab against a GitLab that is down: the message is spooled."""
    spool = tmp_path / "alerts"
    with FakeServer(default=Reply(503, "down")) as srv:
        notify_gitlab(
            verdict=verdict or _verdict(tmp_path), environ=job(srv.url, **env_extra), log=lambda _: None,
            spool_dir=spool, retries=0,
        )  # fmt: skip
    (entry,) = (spool / "pending").glob("*-gitlab-*.json")
    return entry


def test_the_spool_keeps_signed_data_not_rendered_text(tmp_path):
    entry = _spool_one(tmp_path, {"GATEKEEPER_SPOOL_KEY": KEY})
    text = entry.read_text()
    doc = json.loads(text)
    assert doc["schema"] == "gatekeeper.alert/v2"
    assert "payload" not in doc
    assert MARKER not in text  # nothing rendered
    assert doc["data"]["verdict"]["result"] == "blocked"
    assert doc["data"]["target"] == {"project": "42", "mr_iid": "7", "sha": SHA, "pipeline_id": "991"}
    assert re.fullmatch(r"[0-9a-f]{64}", doc["hmac"])
    assert KEY not in text


def test_a_signed_entry_is_re_rendered_and_sent_to_its_own_project(tmp_path):
    entry = _spool_one(tmp_path, {"GATEKEEPER_SPOOL_KEY": KEY})
    gl = GitLab()
    lines: list[str] = []
    with FakeServer(route=gl.route) as srv:
        resend(spool_dir=entry.parent.parent, environ=job(srv.url, GATEKEEPER_SPOOL_KEY=KEY), log=lines.append)
    assert [s.path for s in gl.writes] == [
        "/api/v4/projects/42/merge_requests/7/notes",
        f"/api/v4/projects/42/statuses/{SHA}",
    ]
    assert MARKER in gl.writes[0].json()["body"]
    assert lines[-1].startswith("gatekeeper: notify --resend: 1 sent")


@pytest.mark.parametrize(
    "resend_job",
    [{"CI_PROJECT_ID": "43"}, {"CI_MERGE_REQUEST_IID": "8"}],
    ids=["another-project", "another-merge-request"],
)
def test_an_entry_for_another_target_is_refused_and_quarantined(tmp_path, resend_job):
    entry = _spool_one(tmp_path, {"GATEKEEPER_SPOOL_KEY": KEY})
    gl = GitLab()
    lines: list[str] = []
    with FakeServer(route=gl.route) as srv:
        resend(
            spool_dir=entry.parent.parent, environ=job(srv.url, GATEKEEPER_SPOOL_KEY=KEY, **resend_job),
            log=lines.append,
        )  # fmt: skip
    assert gl.writes == []
    assert (entry.parent.parent / "quarantine" / entry.name).exists()
    assert "quarantined" in "\n".join(lines)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda d: d["data"]["target"].update(project="999"),
        lambda d: d["data"]["target"].update(sha="d" * 40),
        lambda d: d["data"]["verdict"].update(summary="/merge"),
        lambda d: d["data"]["verdict"].update(result="pass"),
        lambda d: d.update(hmac="0" * 64),
        lambda d: d.pop("hmac"),
    ],
    ids=["project", "sha", "summary", "result", "forged-mac", "no-mac"],
)
def test_a_tampered_entry_is_quarantined(tmp_path, tamper):
    entry = _spool_one(tmp_path, {"GATEKEEPER_SPOOL_KEY": KEY})
    doc = json.loads(entry.read_text())
    tamper(doc)
    entry.write_text(json.dumps(doc))
    gl = GitLab()
    with FakeServer(route=gl.route) as srv:
        resend(spool_dir=entry.parent.parent, environ=job(srv.url, GATEKEEPER_SPOOL_KEY=KEY), log=lambda _: None)
    assert gl.writes == []
    assert (entry.parent.parent / "quarantine" / entry.name).exists()


def test_without_a_key_nothing_is_sent_and_nothing_is_lost(tmp_path):
    """Fail closed: an unsigned entry (no key when it was spooled) is never sent; without a key at resend
    time the entries wait in pending/."""
    lines: list[str] = []
    spool = tmp_path / "alerts"
    with FakeServer(default=Reply(503, "down")) as srv:
        notify_gitlab(verdict=_verdict(tmp_path), environ=job(srv.url), log=lines.append, spool_dir=spool, retries=0)
    assert "GATEKEEPER_SPOOL_KEY" in lines[-1]
    (entry,) = (spool / "pending").glob("*.json")
    assert json.loads(entry.read_text())["hmac"] is None
    gl = GitLab()
    with FakeServer(route=gl.route) as srv:
        resend(spool_dir=spool, environ=job(srv.url), log=lines.append)
        assert entry.exists()  # no key here: left as it is
        assert "GATEKEEPER_SPOOL_KEY" in lines[-1]
        resend(spool_dir=spool, environ=job(srv.url, GATEKEEPER_SPOOL_KEY=KEY), log=lines.append)
    assert gl.writes == []
    assert (spool / "quarantine" / entry.name).exists()


def test_hostile_text_in_a_signed_entry_is_escaped_when_it_is_sent(tmp_path):
    """What notify spooled from a hostile verdict is rendered through the escaping layer at send time."""
    from gatekeeper.contract.verdict import GateResult, Outcome

    gates = [GateResult(HOSTILE, Outcome.FAIL, HOSTILE, "m", value=1.0, unit="ms", rule="<= 0")]
    verdict = write_verdict(tmp_path, gates=gates, context={**MR_CTX, "pipeline_id": "991", "commit": SHA})
    spool = tmp_path / "alerts"
    env_down = {"GATEKEEPER_SPOOL_KEY": KEY}
    with FakeServer(default=Reply(503, "down")) as srv:
        notify_gitlab(verdict=verdict, environ=job(srv.url, **env_down), log=lambda _: None, spool_dir=spool,
                      retries=0)  # fmt: skip
        notify_slack(verdict=verdict, environ=job(srv.url, **env_down), log=lambda _: None, spool_dir=spool,
                     retries=0)  # fmt: skip
    gl = GitLab()
    with FakeServer(route=gl.route) as srv:
        resend(spool_dir=spool, environ=job(srv.url, GATEKEEPER_SPOOL_KEY=KEY), log=lambda _: None, retries=0)
    note = next(s.json()["body"] for s in gl.writes if s.path.endswith("/notes"))
    slack = next(json.dumps(s.json()) for s in gl.writes if s.path.startswith("/services/"))
    assert not [line for line in note.splitlines() if line.lstrip().startswith("/")]  # no quick action
    assert "@all" not in note
    assert "<img" not in note
    assert "<!channel>" not in slack
    assert "<!here>" not in slack
    assert "<https://evil.example|click>" not in slack
