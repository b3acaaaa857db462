"""The MR note belongs to us: only our own note is edited, a failed edit still posts, a retried POST never duplicates."""

from __future__ import annotations

import re

from gatekeeper.notify import notify_gitlab
from gatekeeper.notify.gitlab_note import MARKER
from tests.support.fake_http import FakeServer, Reply, Seen
from tests.support.notify_inputs import job_env, write_verdict

TOKEN = "glpat-OwnerTestToken0123456"
ME, OTHER = 5, 66
MR = {"pipeline_source": "merge_request_event", "mr_iid": "7", "ref": "feature/x", "pipeline_id": "991"}


class GitLab:
    """Notes of MR !7 with authors, like GitLab keeps them; knobs for the failures under test."""

    def __init__(self, notes: list[dict] | None = None, *, put_status: int = 200, post_delay_s: float = 0.0) -> None:
        self.notes = list(notes or [])
        self.put_status = put_status
        self.post_delay_s = post_delay_s
        self.puts: list[int] = []

    def route(self, seen: Seen) -> Reply:
        path = seen.path.split("?")[0]
        if path == "/api/v4/user":
            return Reply(200, {"id": ME, "username": "project_42_bot"})
        if path == "/api/v4/projects/42/merge_requests/7/notes":
            if seen.method == "GET":
                return Reply(200, list(reversed(self.notes)))
            note = {"id": 100 + len(self.notes), "body": seen.json()["body"], "author": {"id": ME}}
            self.notes.append(note)  # stored before the (possibly slow) answer, as a real server does
            return Reply(201, note, delay_s=self.post_delay_s)
        m = re.fullmatch(r"/api/v4/projects/42/merge_requests/7/notes/(\d+)", path)
        if m and seen.method == "PUT":
            self.puts.append(int(m.group(1)))
            if self.put_status != 200:
                return Reply(self.put_status, {"message": "403 Forbidden"})
            note = next(n for n in self.notes if n["id"] == int(m.group(1)))
            note["body"] = seen.json()["body"]
            return Reply(200, note)
        if path.startswith("/api/v4/projects/42/statuses/") and seen.method == "POST":
            return Reply(201, {"id": 9})
        return Reply(404, {"message": "404 Not Found"})


def _run(tmp_path, gl: GitLab, **kw) -> tuple[list[str], FakeServer]:
    lines: list[str] = []
    with FakeServer(route=gl.route) as srv:
        env = {**job_env(MR), "CI_API_V4_URL": f"{srv.url}/api/v4", "GATEKEEPER_GITLAB_TOKEN": TOKEN,
               "CI_PROJECT_ID": "42"}  # fmt: skip
        code = notify_gitlab(
            verdict=write_verdict(tmp_path, context=MR), environ=env, log=lines.append,
            spool_dir=tmp_path / "alerts", **kw,
        )  # fmt: skip
    assert code == 0
    return lines, srv


def _statuses(srv: FakeServer) -> list[Seen]:
    return [s for s in srv.seen if "/statuses/" in s.path]


def test_a_planted_note_with_our_marker_is_never_edited(tmp_path):
    planted = {"id": 3, "body": f"{MARKER}\nplease approve: [pipeline](https://evil.example)", "author": {"id": OTHER}}
    gl = GitLab([planted])
    lines, srv = _run(tmp_path, gl)
    assert gl.puts == []
    assert planted["body"].startswith(MARKER + "\nplease approve")
    ours = [n for n in gl.notes if n["author"]["id"] == ME]
    assert len(ours) == 1
    assert MARKER in ours[0]["body"]
    assert len(_statuses(srv)) == 1
    assert not list((tmp_path / "alerts").rglob("*.json")), lines


def test_our_own_note_is_updated(tmp_path):
    gl = GitLab([{"id": 3, "body": f"{MARKER}\nold verdict", "author": {"id": ME}}])
    lines, _ = _run(tmp_path, gl)
    assert gl.puts == [3]
    assert "updated note 3 on !7" in lines[0]


def test_a_failed_update_posts_a_new_note_and_still_the_commit_status(tmp_path):
    gl = GitLab([{"id": 3, "body": f"{MARKER}\nold verdict", "author": {"id": ME}}], put_status=403)
    lines, srv = _run(tmp_path, gl, retries=0)
    assert gl.puts == [3]
    assert len([n for n in gl.notes if n["id"] != 3 and MARKER in n["body"]]) == 1
    assert len(_statuses(srv)) == 1
    assert any("created note" in line for line in lines), lines


def test_a_post_that_times_out_on_our_side_is_not_posted_twice(tmp_path):
    gl = GitLab(post_delay_s=1.5)
    lines, _ = _run(tmp_path, gl, timeout=0.5, retries=3)
    assert len([n for n in gl.notes if MARKER in n["body"]]) == 1, lines
    assert any("created note" in line for line in lines), lines


def test_retry_after_nan_does_not_lose_the_message(tmp_path):
    replies = [Reply(429, {"message": "slow down"}, headers={"Retry-After": "nan"})]
    gl = GitLab()
    lines: list[str] = []
    with FakeServer(replies=replies, route=gl.route) as srv:
        env = {**job_env(MR), "CI_API_V4_URL": f"{srv.url}/api/v4", "GATEKEEPER_GITLAB_TOKEN": TOKEN,
               "CI_PROJECT_ID": "42"}  # fmt: skip
        assert notify_gitlab(verdict=write_verdict(tmp_path, context=MR), environ=env, log=lines.append,
                             spool_dir=tmp_path / "alerts", retries=2) == 0  # fmt: skip
    assert len([n for n in gl.notes if MARKER in n["body"]]) == 1, lines


def test_slack_retry_after_nan_is_retried(tmp_path):
    from gatekeeper.notify import notify_slack

    replies = [Reply(429, "rate_limited", headers={"Retry-After": "nan"}), Reply(200, "ok")]
    lines: list[str] = []
    with FakeServer(replies=replies) as srv:
        env = {"SLACK_WEBHOOK_URL": f"{srv.url}/services/T0/B0/XYZ"}
        assert notify_slack(verdict=write_verdict(tmp_path), environ=env, log=lines.append,
                            spool_dir=tmp_path / "alerts", retries=2) == 0  # fmt: skip
    assert len(srv.seen) == 2
    assert "sent" in lines[-1], lines
