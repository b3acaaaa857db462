"""GitLabClient against a local server: timeouts, retries with Retry-After, refusal, redaction."""

from __future__ import annotations

import pytest

from gatekeeper.core.gitlab_api import GitLabClient, GitLabError, client_from_env
from tests.support.fake_http import FakeServer, Reply, refused_url

TOKEN = "glpat-SECRETsecretSECRET1234"


def _client(url: str, **kw) -> GitLabClient:
    kw.setdefault("sleep", lambda s: None)
    kw.setdefault("retries", 2)
    return GitLabClient(api_url=f"{url}/api/v4/", token=TOKEN, **kw)


def test_sends_private_token_and_decodes_json():
    with FakeServer(default=Reply(200, {"id": 5})) as srv:
        assert _client(srv.url).request("GET", "/projects/42") == {"id": 5}
    assert srv.seen[0].headers["PRIVATE-TOKEN"] == TOKEN
    assert srv.seen[0].path == "/api/v4/projects/42"


def test_429_retry_after_is_honoured_and_5xx_retried():
    slept: list[float] = []
    replies = [Reply(429, "slow down", {"Retry-After": "7"}), Reply(502, "bad gateway")]
    with FakeServer(replies, default=Reply(200, [])) as srv:
        assert _client(srv.url, sleep=slept.append, backoff_s=0.5).request("GET", "/x") == []
    assert slept == [7.0, 1.0]  # Retry-After, then exponential backoff (0.5 * 2**1)
    assert len(srv.seen) == 3


def test_4xx_fails_at_once_and_redacts_an_echoed_token():
    with FakeServer(default=Reply(401, f"invalid token {TOKEN}")) as srv, pytest.raises(GitLabError) as err:
        _client(srv.url).request("POST", "/projects/42/statuses/abc", json={})
    assert len(srv.seen) == 1
    assert err.value.status == 401
    assert TOKEN not in str(err.value)
    assert "[REDACTED]" in str(err.value)


def test_read_timeout_is_retried_then_fails():
    with FakeServer(default=Reply(200, {}, delay_s=1.0)) as srv, pytest.raises(GitLabError, match="Timeout"):
        _client(srv.url, timeout=(0.5, 0.2), retries=1).request("GET", "/slow")
    assert len(srv.seen) == 2


def test_connection_refused_fails_after_retries():
    with pytest.raises(GitLabError, match="ConnectionError"):
        _client(refused_url(), retries=1).request("GET", "/x")


def test_paged_follows_pages_until_a_short_one():
    pages = [Reply(200, [{"id": i} for i in range(100)]), Reply(200, [{"id": 100}])]
    with FakeServer(pages) as srv:
        items = _client(srv.url).paged("/projects/1/merge_requests/2/notes")
    assert len(items) == 101
    assert "page=2" in srv.seen[1].path


def test_client_from_env_needs_url_and_token():
    assert client_from_env({"CI_API_V4_URL": "https://gl/api/v4"}) is None
    assert client_from_env({"GATEKEEPER_GITLAB_TOKEN": TOKEN}) is None
    assert client_from_env({"CI_API_V4_URL": "https://gl/api/v4", "GATEKEEPER_GITLAB_TOKEN": TOKEN}) is not None
    assert _client("http://h").project_path("group/sub/repo") == "/projects/group%2Fsub%2Frepo"


def test_non_json_success_and_bad_url_are_errors_not_crashes():
    with FakeServer(default=Reply(200, "<html>proxy login</html>")) as srv, pytest.raises(GitLabError, match="JSON"):
        _client(srv.url).request("GET", "/x")
    with pytest.raises(GitLabError, match=r"InvalidURL|MissingSchema|InvalidSchema"):
        GitLabClient(api_url="nota://url", token=TOKEN, retries=0).request("GET", "/x")


@pytest.mark.parametrize("body", ["[" * 5000 + "]" * 5000, '{"id": 5, "id": 6}', "not json"])
def test_an_answer_the_strict_json_reader_refuses_is_a_gitlab_error_never_a_crash(body: str) -> None:
    # a 5,000-deep answer was exit 70 (RecursionError through requests' json())
    with FakeServer(default=Reply(200, body)) as srv, pytest.raises(GitLabError, match="not JSON"):
        _client(srv.url).request("GET", "/projects/42")
