"""``gatekeeper doctor gitlab`` against the local fake GitLab server: one test per setting
it checks, each turned from right to wrong, plus the CLI (text, JSON, exit codes, no token)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import pytest
import yaml

from gatekeeper.cli import main
from gatekeeper.core.gitlab_api import GitLabClient
from gatekeeper.machine.findings import Finding
from gatekeeper.machine.gitlab_settings import check_project
from tests.support.fake_http import FakeServer, Reply, Seen

TOKEN = "glpat-DOCTORdoctorDOCTOR1234"
PROJECT = "/api/v4/projects/platform%2Fmodel"

GATE_YAML = {
    "gatekeeper:gate": {
        "script": ["gatekeeper evaluate"],
        "allow_failure": {"exit_codes": [3, 4]},
        "parallel": {"matrix": [{"CHANNEL": ["stable", "nightly"]}]},
    }
}


@dataclass
class FakeGitLab:
    """A project whose settings enforce the gate; tests break one thing at a time."""

    project: dict[str, Any] = field(
        default_factory=lambda: {
            "id": 7,
            "only_allow_merge_if_pipeline_succeeds": True,
            "allow_merge_on_skipped_pipeline": False,
        }
    )
    lint: dict[str, Any] = field(
        default_factory=lambda: {
            "valid": True,
            "errors": [],
            "merged_yaml": yaml.safe_dump(GATE_YAML),
            "jobs": [
                {"name": "gatekeeper:gate: [stable]", "allow_failure": False, "when": "always"},
                {"name": "gatekeeper:gate: [nightly]", "allow_failure": False, "when": "always"},
                {"name": "gatekeeper:verify_hip: [stable]", "allow_failure": False, "when": "on_success"},
            ],
        }
    )
    branch: dict[str, Any] | None = field(
        default_factory=lambda: {
            "name": "main",
            "allow_force_push": False,
            "push_access_levels": [{"access_level": 40}],
        }
    )
    tags: list[dict[str, Any]] = field(
        default_factory=lambda: [{"name": "*", "create_access_levels": [{"access_level": 40}]}]
    )
    variables: list[dict[str, Any]] = field(
        default_factory=lambda: [{"key": "GATEKEEPER_GITLAB_TOKEN", "masked": True, "protected": False}]
    )
    refuse: set[str] = field(default_factory=set)  # routes answering 403

    def route(self, seen: Seen) -> Reply:
        if seen.headers.get("PRIVATE-TOKEN") != TOKEN:
            return Reply(401, {"message": "401 Unauthorized"})
        url = urlparse(seen.path)
        query = parse_qs(url.query)
        if not url.path.startswith(PROJECT):
            return Reply(404, {"message": "404 Project Not Found"})
        rest = url.path[len(PROJECT) :]
        if rest.lstrip("/").split("/")[0] in self.refuse:
            return Reply(403, {"message": "403 Forbidden"})
        if rest == "":
            return Reply(200, self.project)
        if rest == "/ci/lint":
            assert query == {"dry_run": ["true"], "include_jobs": ["true"], "ref": ["main"]}
            return Reply(200, self.lint)
        if rest.startswith("/protected_branches/"):
            assert unquote(rest.rsplit("/", 1)[1]) == "main"
            return Reply(200, self.branch) if self.branch else Reply(404, {"message": "404 Not found"})
        if rest == "/protected_tags":
            return Reply(200, self.tags if query.get("page") == ["1"] else [])
        if rest == "/variables":
            return Reply(200, self.variables if query.get("page") == ["1"] else [])
        return Reply(404, {"message": "404 Not found"})


@pytest.fixture
def fake() -> Iterator[tuple[FakeGitLab, str]]:
    state = FakeGitLab()
    with FakeServer(route=state.route) as srv:
        yield state, srv.url


def _check(fake: tuple[FakeGitLab, str], **kw: Any) -> dict[str, Finding]:
    _, url = fake
    client = GitLabClient(api_url=f"{url}/api/v4", token=TOKEN, retries=0, sleep=lambda s: None)
    findings = check_project(client, "platform/model", protected_branch="main", **kw)
    assert len({f.check for f in findings}) == len(findings), "one finding per check"
    return {f.check: f for f in findings}


def test_an_enforcing_project_passes_every_check(fake: tuple[FakeGitLab, str]) -> None:
    found = _check(fake)
    assert {c: f.severity for c, f in found.items()} == {
        "merge.pipelines_must_succeed": "ok",
        "merge.skipped_pipelines": "ok",
        "gate.on_protected_branch": "ok",
        "protected_branch": "ok",
        "protected_tags": "ok",
        "variables[GATEKEEPER_GITLAB_TOKEN]": "ok",
    }


# ---------------------------------------------------------------- merge settings


def test_pipelines_must_succeed_off_is_an_error(fake: tuple[FakeGitLab, str]) -> None:
    fake[0].project["only_allow_merge_if_pipeline_succeeds"] = False
    f = _check(fake)["merge.pipelines_must_succeed"]
    assert f.severity == "error"
    assert "Pipelines must succeed" in f.remediation
    assert "only_allow_merge_if_pipeline_succeeds=true" in f.remediation


def test_skipped_pipelines_considered_successful_is_an_error(fake: tuple[FakeGitLab, str]) -> None:
    fake[0].project["allow_merge_on_skipped_pipeline"] = True
    f = _check(fake)["merge.skipped_pipelines"]
    assert f.severity == "error"
    assert "allow_merge_on_skipped_pipeline=false" in f.remediation


def test_unreadable_merge_setting_is_never_a_pass(fake: tuple[FakeGitLab, str]) -> None:
    del fake[0].project["allow_merge_on_skipped_pipeline"]
    del fake[0].project["only_allow_merge_if_pipeline_succeeds"]
    found = _check(fake)
    assert found["merge.skipped_pipelines"].severity == "error"
    assert "not readable" in found["merge.skipped_pipelines"].message
    assert found["merge.pipelines_must_succeed"].severity == "error"


# ---------------------------------------------------------------- the gate job


def test_gate_allowed_to_fail_on_the_protected_branch_is_an_error(fake: tuple[FakeGitLab, str]) -> None:
    fake[0].lint["jobs"][1]["allow_failure"] = True
    f = _check(fake)["gate.on_protected_branch"]
    assert f.severity == "error"
    assert "gatekeeper:gate: [nightly] is allowed to fail" in f.message


@pytest.mark.parametrize(
    ("allow_failure", "expected"),
    [(True, "allow_failure: true"), ({"exit_codes": [1, 3]}, "exit code(s) 1"), ({"exit_codes": 2}, "exit code(s) 2")],
)
def test_gate_exit_codes_beyond_warnings_and_skips_are_an_error(
    fake: tuple[FakeGitLab, str], allow_failure: Any, expected: str
) -> None:
    doc = {"gatekeeper:gate": {**GATE_YAML["gatekeeper:gate"], "allow_failure": allow_failure}}
    fake[0].lint["merged_yaml"] = yaml.safe_dump(doc)
    f = _check(fake)["gate.on_protected_branch"]
    assert f.severity == "error"
    assert expected in f.message


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize("merged", [ALIAS_BOMB, "gatekeeper:gate: {allow_failure: true}\ngatekeeper:gate: {}\n", 5])
def test_a_merged_yaml_the_bounded_reader_refuses_is_no_definition(fake: tuple[FakeGitLab, str], merged: Any) -> None:
    # GitLab's answer goes through the gates file's reader (bounded size and alias expansion, no duplicate key):
    # of two definitions of the gate the last silently won
    fake[0].lint["merged_yaml"] = merged
    f = _check(fake)["gate.on_protected_branch"]
    assert "allow_failure: true" not in f.message


def test_no_gate_job_or_a_manual_one_is_an_error(fake: tuple[FakeGitLab, str]) -> None:
    jobs = fake[0].lint["jobs"]
    fake[0].lint["jobs"] = [j for j in jobs if not j["name"].startswith("gatekeeper:gate")]
    f = _check(fake)["gate.on_protected_branch"]
    assert f.severity == "error"
    assert "has no gatekeeper:gate job" in f.message
    fake[0].lint["jobs"] = [{**jobs[0], "when": "manual"}]
    assert "runs when: manual" in _check(fake)["gate.on_protected_branch"].message


def test_invalid_or_unreadable_pipeline_is_an_error(fake: tuple[FakeGitLab, str]) -> None:
    fake[0].lint = {"valid": False, "errors": ["jobs:x config should implement a script: or a trigger: keyword"]}
    f = _check(fake)["gate.on_protected_branch"]
    assert f.severity == "error"
    assert "should implement a script" in f.message
    fake[0].refuse.add("ci")
    f = _check(fake)["gate.on_protected_branch"]
    assert f.severity == "error"
    assert "not verified" in f.message
    assert "read_api" in f.remediation


# ---------------------------------------------------------------- protected branch and tags


def test_unprotected_branch_is_an_error(fake: tuple[FakeGitLab, str]) -> None:
    fake[0].branch = None
    f = _check(fake)["protected_branch"]
    assert f.severity == "error"
    assert "main is not protected" in f.message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"allow_force_push": True}, "force pushes are allowed"),
        ({"push_access_levels": [{"access_level": 30}]}, "developers may push"),
    ],
)
def test_weak_branch_protection_is_an_error(
    fake: tuple[FakeGitLab, str], change: dict[str, Any], expected: str
) -> None:
    fake[0].branch.update(change)  # type: ignore[union-attr]
    f = _check(fake)["protected_branch"]
    assert f.severity == "error"
    assert expected in f.message


def test_push_by_no_one_is_fine(fake: tuple[FakeGitLab, str]) -> None:
    fake[0].branch["push_access_levels"] = [{"access_level": 0}]  # type: ignore[index]
    assert _check(fake)["protected_branch"].severity == "ok"


def test_unprotected_release_tags_are_an_error(fake: tuple[FakeGitLab, str]) -> None:
    fake[0].tags = [{"name": "release-*", "create_access_levels": [{"access_level": 40}]}]
    f = _check(fake)["protected_tags"]
    assert f.severity == "error"
    assert "not protected" in f.message
    fake[0].tags = [{"name": "*.*.*", "create_access_levels": [{"access_level": 30}]}]
    assert _check(fake)["protected_tags"].severity == "warning"
    fake[0].tags = [{"name": "*.*.*", "create_access_levels": [{"access_level": 40}]}]
    assert _check(fake)["protected_tags"].severity == "ok"


# ---------------------------------------------------------------- variables


def test_missing_token_variable_is_a_warning(fake: tuple[FakeGitLab, str]) -> None:
    fake[0].variables = []
    f = _check(fake)["variables[GATEKEEPER_GITLAB_TOKEN]"]
    assert f.severity == "warning"
    assert "masked=true" in f.remediation


def test_unmasked_secret_is_an_error(fake: tuple[FakeGitLab, str]) -> None:
    fake[0].variables = [{"key": "GATEKEEPER_GITLAB_TOKEN", "masked": False, "protected": False}]
    assert _check(fake)["variables[GATEKEEPER_GITLAB_TOKEN]"].severity == "error"
    # a Slack secret that is set is checked even when slack is not asked for
    fake[0].variables.append({"key": "SLACK_BOT_TOKEN", "masked": False, "protected": False})
    assert _check(fake)["variables[SLACK_BOT_TOKEN]"].severity == "error"


def test_protected_secret_is_a_warning(fake: tuple[FakeGitLab, str]) -> None:
    fake[0].variables = [{"key": "GATEKEEPER_GITLAB_TOKEN", "masked": True, "protected": True}]
    f = _check(fake)["variables[GATEKEEPER_GITLAB_TOKEN]"]
    assert f.severity == "warning"
    assert "merge-request pipelines" in f.message


def test_slack_needs_a_masked_webhook_or_bot_token(fake: tuple[FakeGitLab, str]) -> None:
    assert _check(fake, slack=True)["variables[SLACK]"].severity == "error"
    fake[0].variables.append({"key": "SLACK_WEBHOOK_URL", "masked": True, "protected": False})
    found = _check(fake, slack=True)
    assert "variables[SLACK]" not in found
    assert found["variables[SLACK_WEBHOOK_URL]"].severity == "ok"


def test_unreadable_variables_are_an_error(fake: tuple[FakeGitLab, str]) -> None:
    fake[0].refuse.add("variables")
    f = _check(fake)["variables"]
    assert f.severity == "error"
    assert "Maintainer" in f.remediation


# ---------------------------------------------------------------- the CLI


def _cli(fake: tuple[FakeGitLab, str], monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setenv("GATEKEEPER_GITLAB_TOKEN", TOKEN)
    for var in ("CI_API_V4_URL", "CI_PROJECT_ID", "CI_DEFAULT_BRANCH", "GATEKEEPER_PROTECTED_BRANCH"):
        monkeypatch.delenv(var, raising=False)
    return main(["doctor", "gitlab", "--api-url", f"{fake[1]}/api/v4", "--project", "platform/model", *args])


def test_cli_prints_what_to_change_and_exits_1_on_an_error(
    fake: tuple[FakeGitLab, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(fake, monkeypatch) == 0
    out = capsys.readouterr().out
    assert "the gate is enforced" in out
    fake[0].project["only_allow_merge_if_pipeline_succeeds"] = False
    assert _cli(fake, monkeypatch) == 1
    out = capsys.readouterr().out
    assert "[x] merge.pipelines_must_succeed" in out
    assert 'fix: Settings > Merge requests > Merge checks: turn on "Pipelines must succeed"' in out
    assert TOKEN not in out


@pytest.mark.parametrize(
    ("state", "shown"),
    [
        ({"masked": True, "protected": False}, "GATEKEEPER_GITLAB_TOKEN is set and masked"),
        ({"masked": False, "protected": False}, "turn on Masked for GATEKEEPER_GITLAB_TOKEN in Settings"),
        ({"masked": True, "protected": True}, "turn off Protect variable for GATEKEEPER_GITLAB_TOKEN in Settings"),
        (None, "add GATEKEEPER_GITLAB_TOKEN with Masked on in Settings"),
    ],
)
def test_cli_variable_lines_are_not_taken_for_secrets(
    fake: tuple[FakeGitLab, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    state: dict[str, bool] | None,
    shown: str,
) -> None:
    """The job log's redactor hides what follows a secret-named key and a colon ("X_TOKEN: ..."): a finding
    about a variable, or its fix, written that way was shown as "[REDACTED]" though it holds no secret."""
    fake[0].variables = [] if state is None else [{"key": "GATEKEEPER_GITLAB_TOKEN", **state}]
    _cli(fake, monkeypatch, "--slack")  # also the Slack finding: neither variable set
    out = capsys.readouterr().out
    assert "[REDACTED]" not in out
    assert shown in out
    assert "variables[SLACK]: slack is on, but neither SLACK_WEBHOOK_URL nor SLACK_BOT_TOKEN" in out


def test_cli_json(
    fake: tuple[FakeGitLab, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake[0].variables = []
    assert _cli(fake, monkeypatch, "--format", "json", "--branch", "main") == 0  # warnings only
    doc = json.loads(capsys.readouterr().out)
    assert doc["branch"] == "main"
    severities = {f["check"]: f["severity"] for f in doc["findings"]}
    assert severities["variables[GATEKEEPER_GITLAB_TOKEN]"] == "warning"


def test_cli_bad_token_is_an_error_finding_without_the_token(
    fake: tuple[FakeGitLab, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATEKEEPER_GITLAB_TOKEN", "glpat-WRONGwrongWRONG0000")
    assert main(["doctor", "gitlab", "--api-url", f"{fake[1]}/api/v4", "--project", "platform/model"]) == 1
    out = capsys.readouterr().out
    assert "invalid or expired" in out
    assert "WRONGwrong" not in out


def test_cli_without_project_or_token_is_bad_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in ("CI_API_V4_URL", "CI_PROJECT_ID", "CI_PROJECT_PATH", "GATEKEEPER_GITLAB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    assert main(["doctor", "gitlab"]) == 2
    assert "give --project" in capsys.readouterr().err
    assert main(["doctor", "gitlab", "--project", "a/b", "--api-url", "http://127.0.0.1:9/api/v4"]) == 2
    assert "GATEKEEPER_GITLAB_TOKEN not set" in capsys.readouterr().err
