from __future__ import annotations

import io
import json
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from gatekeeper.contract.stage_report import Environment, Metric, StageReport
from gatekeeper.core.errors import InputError
from gatekeeper.history import RunInfo, open_store
from gatekeeper.history.gitlab import GitLabStore

TOKEN = "glpat-abcdefghijklmnop1234"
JOB_TOKEN = "jobtok-0123456789abcdef"


def _report(value: float, *, arch: str = "gfx942") -> StageReport:
    env = Environment("2.5.0", "3.11", "runner", "stable", "rocm", rocm_version="6.3.1", gfx_arch=arch)
    metrics = {"latency_ms": Metric.of(value, "ms", "lower", [[value]] * 3)}
    return StageReport("performance_baseline", "passed", "2026-01-01T00:00:00+00:00", 1.0, env, metrics,
                       config={"model": "demo", "batch_size": 8})  # fmt: skip


def _zip(name: str, doc: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(name, json.dumps(doc))
    return buf.getvalue()


class FakeGitLab:
    """Answers like the GitLab v4 API for the routes the store uses, and records what it was asked."""

    def __init__(self) -> None:
        self.pipelines: list[dict[str, Any]] = []
        self.jobs: dict[int, list[dict[str, Any]]] = {}
        self.files: dict[str, bytes] = {}  # path under /api/v4/projects/42/ -> body
        self.requests: list[tuple[str, dict[str, list[str]], dict[str, str]]] = []
        self.status_override: int | None = None
        self.transient_failures = 0  # answer 503 this many times first (a GitLab under load)

    def handle(self, path: str, query: dict[str, list[str]], headers: dict[str, str]) -> tuple[int, bytes]:
        self.requests.append((path, query, headers))
        if self.status_override:
            return self.status_override, b'{"message": "nope"}'
        if self.transient_failures > 0:
            self.transient_failures -= 1
            return 503, b'{"message": "503 Service Unavailable"}'
        if headers.get("PRIVATE-TOKEN") != TOKEN and headers.get("JOB-TOKEN") != JOB_TOKEN:
            return 401, b'{"message": "401 Unauthorized"}'
        prefix = "/api/v4/projects/42/"
        if not path.startswith(prefix):
            return 404, b"{}"
        rest = path[len(prefix) :]
        if rest == "pipelines":
            if "PRIVATE-TOKEN" not in headers:
                return 403, b'{"message": "403 Forbidden"}'
            ps = [p for p in self.pipelines if p["ref"] == query["ref"][0] and p["status"] == query["status"][0]]
            return 200, json.dumps(sorted(ps, key=lambda p: -p["id"])).encode()
        if rest.startswith("pipelines/") and rest.endswith("/jobs"):
            return 200, json.dumps(self.jobs.get(int(rest.split("/")[1]), [])).encode()
        key = rest + (f"?job={query['job'][0]}" if "job" in query else "")
        return (200, self.files[key]) if key in self.files else (404, b'{"message": "404 Not found"}')


@pytest.fixture
def gitlab() -> Iterator[tuple[FakeGitLab, str]]:
    fake = FakeGitLab()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            status, body = fake.handle(url.path, parse_qs(url.query), dict(self.headers))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{server.server_address[1]}/api/v4"
    server.shutdown()
    server.server_close()


def _env(api: str, **extra: str) -> dict[str, str]:
    return {"CI_API_V4_URL": api, "CI_PROJECT_ID": "42", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main", **extra}


def test_private_token_walks_pipelines_jobs_and_artifacts(gitlab: tuple[FakeGitLab, str]) -> None:
    fake, api = gitlab
    fake.pipelines = [
        {"id": 9, "ref": "main", "status": "success"},
        {"id": 8, "ref": "main", "status": "success"},
        {"id": 10, "ref": "main", "status": "failed"},
        {"id": 11, "ref": "feature", "status": "success"},
    ]
    fake.jobs = {
        9: [{"id": 91, "name": "performance_baseline", "artifacts_file": {"filename": "artifacts.zip"}}],
        8: [{"id": 81, "name": "performance_baseline"}],
    }
    # pipeline 9: another arch (by zip only); pipeline 8: comparable (by path)
    fake.files["jobs/91/artifacts"] = _zip("artifacts/performance_baseline.json", _report(5.0, arch="gfx90a").to_dict())
    fake.files["jobs/81/artifacts/artifacts/performance_baseline.json"] = json.dumps(_report(7.0).to_dict()).encode()
    store = GitLabStore.from_env("", _env(api, GATEKEEPER_GITLAB_TOKEN=TOKEN, CI_JOB_TOKEN=JOB_TOKEN))
    got = store.latest("performance_baseline", _report(0.0))
    assert got is not None
    assert got.metrics["latency_ms"].value == 7.0
    assert [r[1].get("ref") for r in fake.requests if r[0].endswith("/pipelines")] == [["main"]]
    assert all(r[2].get("PRIVATE-TOKEN") == TOKEN for r in fake.requests)
    # another arch only: never compared silently, and the reason is kept
    assert store.latest("performance_baseline", _report(0.0, arch="gfx1100")) is None
    assert store.why_missing == "baseline ran on arch gfx90a, this run on gfx1100"  # pipeline 9, the newest
    assert [r.metrics["latency_ms"].value for _, r in store.history("performance_baseline")] == [5.0, 7.0]


def test_job_token_uses_the_ref_artifacts_route(gitlab: tuple[FakeGitLab, str]) -> None:
    fake, api = gitlab
    fake.files["jobs/artifacts/main/raw/artifacts/performance_baseline.json?job=perf-nightly"] = json.dumps(
        _report(3.0).to_dict()
    ).encode()
    env = _env(api, CI_JOB_TOKEN=JOB_TOKEN, GATEKEEPER_BASELINE_JOBS="perf-nightly")
    store = GitLabStore.from_env("", env)
    assert store.latest("performance_baseline", _report(0.0)).metrics["latency_ms"].value == 3.0
    assert fake.requests[-1][2]["JOB-TOKEN"] == JOB_TOKEN
    assert store.latest("verify_hip", _report(0.0)) is None
    assert "no verify_hip.json" in store.why_missing


def test_branch_from_spec_and_default_branch(gitlab: tuple[FakeGitLab, str]) -> None:
    _, api = gitlab
    env = {"CI_API_V4_URL": api, "CI_PROJECT_ID": "42", "CI_DEFAULT_BRANCH": "develop"}
    assert GitLabStore.from_env("", env).branch == "develop"
    assert GitLabStore.from_env("release/1.2", env).branch == "release/1.2"


def test_missing_variables_are_one_input_error() -> None:
    with pytest.raises(InputError, match="CI_API_V4_URL, CI_PROJECT_ID") as err:
        GitLabStore.from_env("", {})
    assert "\n" not in err.value.line()


def test_refusal_names_the_fix_and_never_the_token(gitlab: tuple[FakeGitLab, str]) -> None:
    fake, api = gitlab
    store = GitLabStore.from_env("", _env(api, GATEKEEPER_GITLAB_TOKEN="glpat-wrongwrongwrongwrong"))
    with pytest.raises(InputError, match="refused") as err:
        store.latest("performance_baseline", _report(0.0))
    assert "GATEKEEPER_GITLAB_TOKEN" in err.value.hint
    assert "glpat-wrong" not in str(err.value)
    fake.status_override = 502
    store = GitLabStore.from_env("", _env(api, GATEKEEPER_GITLAB_TOKEN=TOKEN))
    with pytest.raises(InputError, match="answered 502"):
        store.latest("performance_baseline", _report(0.0))


def test_unreachable_server_is_an_input_error_without_token(tmp_path: Path) -> None:
    store = GitLabStore.from_env("", _env("http://127.0.0.1:9/api/v4", GATEKEEPER_GITLAB_TOKEN=TOKEN))
    with pytest.raises(InputError, match="unreachable") as err:
        store.latest("performance_baseline", _report(0.0))
    assert TOKEN not in str(err.value)


def test_save_is_refused_with_the_alternative() -> None:
    store = GitLabStore("http://127.0.0.1:9/api/v4", "42", "main", None)
    with pytest.raises(InputError, match="read-only"):
        store.save(_report(1.0), RunInfo())


def test_registered_as_a_store(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"CI_API_V4_URL": "http://127.0.0.1:9/api/v4", "CI_PROJECT_ID": "42", "CI_DEFAULT_BRANCH": "main"}
    store = open_store("gitlab:", env)
    assert isinstance(store, GitLabStore)
    assert store.branch == "main"
    assert open_store("gitlab:stable", env).branch == "stable"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert isinstance(open_store("gitlab:"), GitLabStore)  # environ defaults to os.environ


def test_a_transient_server_error_is_retried_by_the_one_gitlab_client(gitlab: tuple[FakeGitLab, str]) -> None:
    fake, api = gitlab
    fake.files["jobs/artifacts/main/raw/artifacts/performance_baseline.json?job=performance_baseline"] = json.dumps(
        _report(3.0).to_dict()
    ).encode()
    fake.transient_failures = 1
    store = GitLabStore.from_env("", _env(api, CI_JOB_TOKEN=JOB_TOKEN))
    got = store.latest("performance_baseline", _report(0.0))
    assert got is not None
    assert got.metrics["latency_ms"].value == 3.0
    assert len(fake.requests) == 2  # the 503, then the retry


def test_component_defaults_read_the_target_branch_channel_dir(gitlab: tuple[FakeGitLab, str]) -> None:
    # What the CI component's gate job sets: a merge request compares with its target branch
    # (the baseline policy; other pipelines with the protected branch), results live under
    # artifacts/<channel>/, jobs are the channel's matrix jobs.
    fake, api = gitlab
    name = "gatekeeper:performance_baseline: [stable]"
    fake.files[f"jobs/artifacts/dev/raw/artifacts/stable/performance_baseline.json?job={name}"] = json.dumps(
        _report(4.0).to_dict()
    ).encode()
    env = _env(
        api,
        CI_JOB_TOKEN=JOB_TOKEN,
        CI_MERGE_REQUEST_TARGET_BRANCH_NAME="dev",
        GATEKEEPER_PROTECTED_BRANCH="main",
        GATEKEEPER_BASELINE_ARTIFACTS="artifacts/stable",
        GATEKEEPER_BASELINE_JOBS=f"gatekeeper:verify_hip: [stable],{name},",
    )
    store = GitLabStore.from_env("", env)
    assert store.branch == "dev"
    got = store.latest("performance_baseline", _report(0.0))
    assert got is not None
    assert got.metrics["latency_ms"].value == 4.0
    del env["CI_MERGE_REQUEST_TARGET_BRANCH_NAME"]
    assert GitLabStore.from_env("", env).branch == "main"


def test_zip_prefers_the_channel_path_over_another_channel(gitlab: tuple[FakeGitLab, str]) -> None:
    fake, api = gitlab
    fake.pipelines = [{"id": 5, "ref": "main", "status": "success"}]
    fake.jobs = {5: [{"id": 51, "name": "gate", "artifacts_file": {"filename": "artifacts.zip", "size": 10}}]}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("artifacts/nightly/performance_baseline.json", json.dumps(_report(9.0).to_dict()))
        zf.writestr("artifacts/stable/performance_baseline.json", json.dumps(_report(2.0).to_dict()))
    fake.files["jobs/51/artifacts"] = buf.getvalue()
    env = _env(api, GATEKEEPER_GITLAB_TOKEN=TOKEN, GATEKEEPER_BASELINE_ARTIFACTS="artifacts/stable")
    got = GitLabStore.from_env("", env).latest("performance_baseline", _report(0.0))
    assert got is not None
    assert got.metrics["latency_ms"].value == 2.0
