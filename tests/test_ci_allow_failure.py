"""Principle 9: on tags, the protected branch and merge requests into it, the gate job and the stable stage jobs
allow no failure exit code at all (exit 3 and 4 included); elsewhere the designed allowances stay.

The rendered rules of ci-templates/gatekeeper.yml and of the catalog component are evaluated for each pipeline
context the way GitLab does: the first matching rule wins; a rule that sets ``allow_failure`` (true or false)
replaces the job's, and the job's ``allow_failure: exit_codes`` is then dropped (GitLab's pipeline seed clears
the exit-code criteria whenever ``rules:allow_failure`` is set); a rule without it leaves the job's in force.
Before this was fixed, the gate job's protected rule set no ``allow_failure``, so its ``exit_codes: [3, 4]``
applied there: a gate that exited 4 was an allowed failure on a release tag.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.test_ci_templates import ROOT, STAGES, _include, render

PROTECTED = "main"
CONTEXTS: dict[str, dict[str, str]] = {
    "tag": {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_TAG": "v1.2.3", "CI_COMMIT_REF_NAME": "v1.2.3"},
    "push to the protected branch": {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_BRANCH": PROTECTED},
    "schedule on the protected branch": {"CI_PIPELINE_SOURCE": "schedule", "CI_COMMIT_BRANCH": PROTECTED},
    "merge request into the protected branch": {
        "CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": PROTECTED,
        "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "feature",
    },
    "merge request into another branch": {
        "CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "release-1",
        "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "feature",
    },
    "push to another branch": {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_BRANCH": "feature"},
}  # fmt: skip
STRICT = ("tag", "push to the protected branch", "schedule on the protected branch",
          "merge request into the protected branch")  # fmt: skip


# ---------------------------------------------------------------- GitLab's rules:if, the subset the template uses

_TOKEN = re.compile(r'\s*(\$\w+|==|!=|&&|\|\||\(|\)|"[^"]*")')


def _tokens(expression: str) -> list[str]:
    out, pos = [], 0
    while pos < len(expression.rstrip()):
        m = _TOKEN.match(expression, pos)
        assert m, f"cannot read {expression[pos:]!r}"
        out.append(m.group(1))
        pos = m.end()
    return out


def evaluate(expression: str, env: dict[str, str]) -> bool:
    """``$A == "x" && ($B || $C != "y")``: && binds tighter than ||; an unset variable is empty and false."""
    tokens = _tokens(expression)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def either() -> bool:
        value = both()
        while peek() == "||":
            take()
            value = both() or value
        return value

    def both() -> bool:
        value = term()
        while peek() == "&&":
            take()
            value = term() and value
        return value

    def term() -> bool:
        token = take()
        if token == "(":
            value = either()
            assert take() == ")"
            return value
        assert token.startswith("$"), token
        if peek() in ("==", "!="):
            op, literal = take(), take()
            assert literal.startswith('"'), literal
            equal = env.get(token[1:], "") == literal[1:-1]
            return equal if op == "==" else not equal
        return bool(env.get(token[1:]))

    value = either()
    assert pos == len(tokens), f"unread: {tokens[pos:]}"
    return value


def effective(job: dict[str, Any], env: dict[str, str]) -> tuple[bool, Any, dict[str, str]]:
    """(runs, allow_failure in force, variables) for ``job`` in a pipeline with ``env``."""
    variables = {**job.get("variables", {}), **env}
    for rule in job.get("rules", [{}]):
        if "if" in rule and not evaluate(rule["if"], variables):
            continue
        if rule.get("when") == "never":
            return False, None, variables
        variables = {**variables, **rule.get("variables", {})}
        if "allow_failure" in rule:
            return True, rule["allow_failure"], variables  # the job's exit_codes are dropped
        return True, job.get("allow_failure", False), variables
    return False, None, variables


def test_the_evaluator_reads_the_template_forms():
    env = {"CHANNEL": "stable", "CI_COMMIT_BRANCH": "main", "CI_PIPELINE_SOURCE": "push"}
    assert evaluate('$CHANNEL == "stable" && ($CI_COMMIT_TAG || $CI_COMMIT_BRANCH == "main")', env)
    assert not evaluate('$CHANNEL == "nightly" && $CI_COMMIT_TAG', env)
    assert evaluate('$CI_COMMIT_TAG || $CHANNEL != "x" && $CI_COMMIT_BRANCH == "main"', env)
    assert not evaluate('($CI_COMMIT_TAG || $CHANNEL == "x") && $CI_COMMIT_BRANCH == "main"', env)


# ---------------------------------------------------------------- the policy, per context


def _pipelines() -> dict[str, dict[str, Any]]:
    catalog = {
        "local": "templates/gatekeeper.yml",
        "component_context": {"name": "gatekeeper", "sha": "e93f0933", "version": "1.2.3"},
    }
    out = {}
    for blocking in (False, True):
        out[f"ci-templates, nightly_blocking={blocking}"] = render(_include(nightly_blocking=blocking), ROOT)
        out[f"component, nightly_blocking={blocking}"] = render(
            {"include": [{**catalog, "inputs": {"nightly_blocking": blocking}}]}, ROOT
        )
    return out


PIPELINES = _pipelines()


@pytest.mark.parametrize("pipeline", list(PIPELINES))
@pytest.mark.parametrize("context", STRICT)
def test_no_failure_code_is_allowed_where_a_release_or_a_merge_depends_on_it(pipeline, context):
    jobs = PIPELINES[pipeline]
    blocking = pipeline.endswith("True")
    for channel in ("stable", "nightly"):
        env = {**CONTEXTS[context], "CHANNEL": channel}
        runs, allowed, variables = effective(jobs["gatekeeper:gate"], env)
        if channel == "nightly" and context == "tag":
            assert not runs
            continue
        assert runs
        if channel == "nightly" and context.startswith("merge request") and not blocking:
            assert allowed is True, "the nightly channel is advisory on merge requests (nightly_blocking: false)"
            continue
        assert allowed is False, f"gate ({channel}) may fail with {allowed} on a {context}"
        # a breaker skip is a failure there (exit 1), a pass with warnings a pass (exit 0)
        assert variables.get("GATEKEEPER_SKIP_BLOCKS") == "true"
    for stage in STAGES:
        runs, allowed, _ = effective(jobs[f"gatekeeper:{stage}"], {**CONTEXTS[context], "CHANNEL": "stable"})
        assert runs
        assert allowed is False, f"{stage} (stable) may fail with {allowed} on a {context}"


@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_elsewhere_the_designed_allowances_stay(pipeline):
    jobs = PIPELINES[pipeline]
    for channel in ("stable", "nightly"):
        other_mr = {**CONTEXTS["merge request into another branch"], "CHANNEL": channel}
        assert effective(jobs["gatekeeper:gate"], other_mr)[1] is True
        push = {**CONTEXTS["push to another branch"], "CHANNEL": channel}
        assert effective(jobs["gatekeeper:gate"], push)[1] == {"exit_codes": [3, 4]}
        for stage in STAGES:
            assert effective(jobs[f"gatekeeper:{stage}"], push)[1] == {"exit_codes": [4]}
            assert effective(jobs[f"gatekeeper:{stage}"], other_mr)[1] is True


def _gate_script(jobs: dict[str, Any]) -> str:
    return "\n".join(line for line in jobs["gatekeeper:gate"]["script"] if "gatekeeper evaluate" in line)


@pytest.mark.parametrize(("strict", "rc", "exit_code"), [(True, 3, 0), (True, 1, 1), (False, 3, 3), (True, 0, 0)])
def test_the_gate_script_passes_a_warning_verdict_where_no_failure_code_is_allowed(tmp_path, strict, rc, exit_code):
    """Where no failure code is allowed a verdict that passed with warnings must not turn the job red: the gate
    maps exit 3 to 0 there (the warnings stay in the verdict, the note and the widgets); nothing else changes."""
    from gatekeeper.core import proc

    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "gatekeeper"
    fake.write_text(f"#!/bin/sh\necho verdict\nexit {rc}\n")
    fake.chmod(0o755)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "CHANNEL": "stable", "GATEKEEPER_SKIP_BLOCKS": "true" if strict else ""}
    script = _gate_script(PIPELINES["ci-templates, nightly_blocking=False"])
    result = proc.run(["bash", "-ec", script], timeout=30, env=env, cwd=tmp_path)
    assert result.returncode == exit_code, result.stdout + result.stderr
    assert (tmp_path / "artifacts" / "stable" / "gate.log").read_text().strip() == "verdict"
