"""``gatekeeper doctor gitlab``: does this GitLab project really enforce the gate?

A pipeline that blocks nothing is decoration. This reads, through the REST API, the
settings that decide whether a failing gatekeeper gate stops a merge or a release, and
returns one Finding per setting with what to change:

- ``merge.pipelines_must_succeed``: ``only_allow_merge_if_pipeline_succeeds`` on;
- ``merge.skipped_pipelines``: ``allow_merge_on_skipped_pipeline`` off (a skipped
  pipeline would otherwise merge unverified);
- ``gate.on_protected_branch``: in a simulated push pipeline on the protected branch
  (CI lint, ``dry_run``), every ``gatekeeper:gate`` job runs and may not fail: not
  ``allow_failure: true``, and exit codes allowed to fail only 3 (warnings) and 4
  (breaker open, which the component itself turns into a failure there);
- ``protected_branch``: the branch is protected, force pushes are refused and only
  maintainers (or no one) push directly;
- ``protected_tags``: release tags are protected (a tag pipeline publishes packages);
- ``variables[NAME]``: the CI/CD variables the component reads are set and masked
  (``GATEKEEPER_GITLAB_TOKEN``; ``SLACK_WEBHOOK_URL`` or ``SLACK_BOT_TOKEN`` with Slack).

What could not be read (no permission, no such project) is an error finding, never a
pass. The token is sent as PRIVATE-TOKEN and never printed (GitLabClient redacts it).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.core.gitlab_api import GitLabClient, GitLabError
from gatekeeper.machine.findings import Finding

__all__ = ["ALLOWED_GATE_EXIT_CODES", "check_project", "summary"]

# Exit codes the gate may fail with on the protected branch: 3 passed with warnings;
# 4 breaker open (the component turns a breaker skip into exit 1 there).
ALLOWED_GATE_EXIT_CODES = frozenset({3, 4})
DEVELOPER = 30  # GitLab access levels: 0 no one, 30 developer, 40 maintainer, 60 admin
SECRET_VARIABLES = ("GATEKEEPER_GITLAB_TOKEN", "SLACK_WEBHOOK_URL", "SLACK_BOT_TOKEN")


def check_project(
    client: GitLabClient,
    project: str | int,
    *,
    protected_branch: str = "main",
    gate_job: str = "gatekeeper:gate",
    slack: bool = False,
    release_tag: str = "1.0.0",
) -> list[Finding]:
    """One Finding per setting, in the order of the module docstring."""
    base = client.project_path(project)
    findings: list[Finding] = []
    try:
        settings = client.request("GET", base)
    except GitLabError as err:
        return [_unreadable("project", f"project {project}", err)]
    findings += _merge_settings(settings if isinstance(settings, Mapping) else {})
    findings.append(_gate_on_protected_branch(client, base, protected_branch, gate_job))
    findings.append(_protected_branch(client, base, protected_branch))
    findings.append(_protected_tags(client, base, release_tag))
    findings += _variables(client, base, slack=slack)
    return findings


def _unreadable(check: str, what: str, err: GitLabError) -> Finding:
    hint = {
        401: "the token is invalid or expired",
        403: "the token may not read this: use a project or personal access token with read_api, Maintainer role",
        404: "no such project or branch (or the token cannot see it)",
    }.get(err.status or 0, "check the API URL and the network")
    return Finding(check, "error", f"could not read {what}, so it is not verified: {err}", hint)


# ---------------------------------------------------------------- merge settings


def _merge_settings(settings: Mapping[str, Any]) -> list[Finding]:
    out = []
    where = "Settings > Merge requests > Merge checks"
    if settings.get("only_allow_merge_if_pipeline_succeeds") is True:
        out.append(Finding("merge.pipelines_must_succeed", "ok", "merge requests need a successful pipeline"))
    else:
        out.append(
            Finding(
                "merge.pipelines_must_succeed",
                "error",
                "merge requests can be merged whatever the pipeline says: a failing gate blocks nothing",
                f'{where}: turn on "Pipelines must succeed" '
                "(API: PUT /projects/:id only_allow_merge_if_pipeline_succeeds=true)",
            )
        )
    if settings.get("allow_merge_on_skipped_pipeline") is False:
        out.append(Finding("merge.skipped_pipelines", "ok", "a skipped pipeline does not count as successful"))
    else:
        out.append(
            Finding(
                "merge.skipped_pipelines",
                "error",
                "skipped pipelines are considered successful: a merge request whose pipeline was skipped "
                "merges without any gate"
                + ("" if "allow_merge_on_skipped_pipeline" in settings else " (the setting was not readable)"),
                f'{where}: turn off "Skipped pipelines are considered successful" '
                "(API: PUT /projects/:id allow_merge_on_skipped_pipeline=false)",
            )
        )
    return out


# ---------------------------------------------------------------- the gate job


def _exit_codes(allow_failure: Any) -> set[int] | None:
    """Codes a job may fail with; None when it may fail with any."""
    if allow_failure is True:
        return None
    if isinstance(allow_failure, Mapping):
        codes = allow_failure.get("exit_codes")
        codes = [codes] if isinstance(codes, int) else (codes or [])
        return {int(c) for c in codes}
    return set()


def _gate_on_protected_branch(client: GitLabClient, base: str, branch: str, gate_job: str) -> Finding:
    check = "gate.on_protected_branch"
    params = {"dry_run": "true", "include_jobs": "true", "ref": branch}
    try:
        lint = client.request("GET", f"{base}/ci/lint", params=params)
    except GitLabError as err:
        return _unreadable(check, f"a simulated pipeline on {branch} (CI lint)", err)
    if not isinstance(lint, Mapping) or not lint.get("valid", False):
        errors = "; ".join(map(str, lint.get("errors") or [])) if isinstance(lint, Mapping) else "no answer"
        problem = f"the pipeline on {branch} is not valid: {errors or 'no reason given'}"
        return Finding(check, "error", problem, "fix .gitlab-ci.yml (CI/CD > Editor > Validate)")
    gates = [j for j in lint.get("jobs") or [] if str(j.get("name", "")).startswith(gate_job)]
    if not gates:
        return Finding(
            check,
            "error",
            f"a push pipeline on {branch} has no {gate_job} job: nothing gates this branch",
            "include the gatekeeper component in .gitlab-ci.yml and keep its gate job's rules",
        )
    problems = []
    for job in gates:
        name = job.get("name")
        if job.get("allow_failure") is True:
            problems.append(f"{name} is allowed to fail")
        if job.get("when") in ("manual", "never", "delayed"):
            problems.append(f"{name} runs when: {job.get('when')}")
    try:  # GitLab's answer: read as a gates file is (bounded size and aliases, no duplicate key)
        text = lint.get("merged_yaml")
        merged = files.parse_yaml(text, "GitLab's CI lint merged_yaml").data or {} if isinstance(text, str) else {}
    except InputError:
        merged = {}
    # parallel: matrix jobs are listed as "gatekeeper:gate: [stable]"; their definition is "gatekeeper:gate"
    definition = merged.get(gate_job) if isinstance(merged, Mapping) else None
    if isinstance(definition, Mapping):
        codes = _exit_codes(definition.get("allow_failure"))
        if codes is None:
            problems.append(f"{gate_job} has allow_failure: true")
        elif codes - ALLOWED_GATE_EXIT_CODES:
            extra = ", ".join(map(str, sorted(codes - ALLOWED_GATE_EXIT_CODES)))
            problems.append(f"{gate_job} may fail with exit code(s) {extra} (only 3 and 4 are allowed)")
    if problems:
        return Finding(
            check,
            "error",
            f"on {branch} a failing gate does not block: " + "; ".join(problems),
            f"remove allow_failure overrides of {gate_job} for {branch} in .gitlab-ci.yml "
            "(the component's own rules never allow it to fail there)",
        )
    names = ", ".join(str(j.get("name")) for j in gates)
    return Finding(check, "ok", f"on {branch} the gate jobs run and may not fail ({names})")


# ---------------------------------------------------------------- protected branches and tags


def _levels(rule: Mapping[str, Any], key: str) -> list[int]:
    return [int(a.get("access_level", 0)) for a in rule.get(key) or [] if a.get("access_level") is not None]


def _protected_branch(client: GitLabClient, base: str, branch: str) -> Finding:
    check = "protected_branch"
    try:
        rule = client.request("GET", f"{base}/protected_branches/{quote(branch, safe='')}")
    except GitLabError as err:
        if err.status == 404:
            return Finding(
                check,
                "error",
                f"{branch} is not protected: anyone with Developer role pushes to it without a merge request",
                f"Settings > Repository > Protected branches: protect {branch}, allowed to push: Maintainers or "
                "No one, allowed to force push: off (API: POST /projects/:id/protected_branches)",
            )
        return _unreadable(check, f"the protection of {branch}", err)
    problems = []
    if rule.get("allow_force_push"):
        problems.append("force pushes are allowed")
    push = _levels(rule, "push_access_levels")
    if any(0 < level <= DEVELOPER for level in push):
        problems.append("developers may push directly")
    if problems:
        return Finding(
            check,
            "error",
            f"{branch} is protected, but " + " and ".join(problems) + ": commits can land without a gated pipeline",
            f"Settings > Repository > Protected branches > {branch}: allowed to push: Maintainers or No one; "
            "allowed to force push: off",
        )
    return Finding(check, "ok", f"{branch} is protected (push: maintainers or no one, no force push)")


def _protected_tags(client: GitLabClient, base: str, release_tag: str) -> Finding:
    check = "protected_tags"
    try:
        rules = client.paged(f"{base}/protected_tags")
    except GitLabError as err:
        return _unreadable(check, "the protected tags", err)
    matching = [r for r in rules if fnmatch.fnmatchcase(release_tag, str(r.get("name", "")))]
    fix = (
        "Settings > Repository > Protected tags: protect release tags (e.g. * or *.*.*), allowed to create: "
        "Maintainers (API: POST /projects/:id/protected_tags)"
    )
    if not matching:
        return Finding(
            check,
            "error",
            f"release tags (like {release_tag}) are not protected: anyone with Developer role can create one, "
            "and a tag pipeline publishes packages and images",
            fix,
        )
    if any(0 < level <= DEVELOPER for r in matching for level in _levels(r, "create_access_levels")):
        return Finding(check, "warning", f"developers may create release tags like {release_tag}", fix)
    names = ", ".join(str(r.get("name")) for r in matching)
    return Finding(check, "ok", f"release tags are protected ({names})")


# ---------------------------------------------------------------- CI/CD variables


def _variables(client: GitLabClient, base: str, *, slack: bool) -> list[Finding]:
    try:
        listed = client.paged(f"{base}/variables")
    except GitLabError as err:
        return [_unreadable("variables", "the project's CI/CD variables", err)]
    by_key: dict[str, Mapping[str, Any]] = {}
    for v in listed:
        by_key.setdefault(str(v.get("key")), v)  # the first of several environment scopes
    out = [_secret("GATEKEEPER_GITLAB_TOKEN", by_key, needed="merge-request notes and commit statuses")]
    if slack:
        present = [k for k in ("SLACK_WEBHOOK_URL", "SLACK_BOT_TOKEN") if k in by_key]
        if not present:
            out.append(
                Finding(
                    "variables[SLACK]",
                    "error",
                    "slack is on, but neither SLACK_WEBHOOK_URL nor SLACK_BOT_TOKEN is a project variable "
                    "(group and instance variables are not visible here)",
                    "Settings > CI/CD > Variables: add SLACK_WEBHOOK_URL, masked",
                )
            )
        out += [_secret(k, by_key, needed="Slack alerts") for k in present]
    # any other secret the component reads that is set must be masked too
    out += [_secret(k, by_key, needed="") for k in SECRET_VARIABLES if k in by_key and not _reported(out, k)]
    return out


def _reported(findings: Iterable[Finding], key: str) -> bool:
    return any(f.check == _variable_check(key) for f in findings)


def _variable_check(key: str) -> str:
    """``variables[KEY]``: never ``KEY:`` before the message, which the redactor reads as a secret and its value
    (``core.redact`` hides whatever follows a secret-named key and a colon)."""
    return f"variables[{key}]"


def _secret(key: str, by_key: Mapping[str, Mapping[str, Any]], *, needed: str) -> Finding:
    check = _variable_check(key)
    add = f"add {key} with Masked on in Settings > CI/CD > Variables (API: POST /projects/:id/variables masked=true)"
    var = by_key.get(key)
    if var is None:
        return Finding(
            check,
            "warning",
            f"{key} is not a project variable: no {needed} (group and instance variables are not visible here)",
            add,
        )
    if not var.get("masked"):
        return Finding(
            check,
            "error",
            f"{key} is set but not masked: the secret can appear in job logs",
            f"turn on Masked for {key} in Settings > CI/CD > Variables "
            f"(API: PUT /projects/:id/variables/{key} masked=true)",
        )
    if var.get("protected"):
        return Finding(
            check,
            "warning",
            f"{key} is masked but protected: merge-request pipelines from unprotected branches do not get it",
            f"turn off Protect variable for {key} in Settings > CI/CD > Variables "
            "(or run merge-request pipelines only from protected branches)",
        )
    return Finding(check, "ok", f"{key} is set and masked")


def summary(findings: Sequence[Finding]) -> str:
    errors = sum(f.severity == "error" for f in findings)
    warnings = sum(f.severity == "warning" for f in findings)
    if errors:
        return f"{errors} setting(s) let a failing gate through"
    return "the gate is enforced" + (f", with {warnings} warning(s)" if warnings else "")
