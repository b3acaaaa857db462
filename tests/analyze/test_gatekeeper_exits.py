"""gatekeeper's own failures explain themselves: every way a gatekeeper command ends non-zero, diagnosed from
its job log alone, gets a known category and a signature with a fix, never ``unknown``.

Two halves, both over ``gatekeeper_exits.EXITS``:

- the logs kept in ``tests/analyze/gatekeeper_logs/`` (produced by the real commands, wrapped as
  gitlab-runner prints a job; provenance in its ``index.jsonl``) are diagnosed here, fast;
- every exit is run again now, and its fresh output diagnosed: a gatekeeper message whose wording changes so
  that its signature no longer matches fails here, not in a red pipeline's diagnose job.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gatekeeper.analyze import classify_logs
from gatekeeper.analyze.rules import RuleSet, load_rules
from tests.analyze.gatekeeper_exits import BY_NAME, EXITS, job_log, run
from tests.support.postgres import postgres_server  # noqa: F401 - the session's PostgreSQL server

LOGS = Path(__file__).parent / "gatekeeper_logs"
INDEX = {row["file"]: row for row in map(json.loads, (LOGS / "index.jsonl").read_text().splitlines())}


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    return load_rules()


def _diagnose(path: Path, rules: RuleSet):
    return classify_logs([path], rules=rules, model=None)  # signatures alone: no learned guess may rescue a gap


def _check(diag, exit_, rules: RuleSet) -> None:
    assert diag.category == exit_.category, (diag.category, diag.known_issue, diag.matches[:2])
    assert diag.category != "unknown"
    if exit_.known_issue:
        assert diag.known_issue == exit_.known_issue
    rule = rules.by_id(diag.known_issue)
    assert rule.explanation  # a cause ...
    assert rule.remediation  # ... and a fix, in words
    assert diag.matches
    assert diag.matches[0].rule == diag.known_issue  # the line that proves it is shown


def test_every_exit_has_a_kept_log_with_provenance() -> None:
    assert sorted(INDEX) == sorted(f"{e.name}.log" for e in EXITS)
    for e in EXITS:
        row = INDEX[f"{e.name}.log"]
        assert row["provenance"].startswith("produced by gatekeeper ")
        assert row["exit_code"] == e.code
        text = (LOGS / row["file"]).read_text()
        assert "section_start:" in text
        assert "$ gatekeeper " in text
        assert (
            (f"ERROR: Job failed: exit code {e.code}" in text)
            if e.code
            else ("ERROR: Job failed" in text or "Job succeeded" in text)
        )


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_kept_log_is_diagnosed(name: str, rules: RuleSet) -> None:
    _check(_diagnose(LOGS / f"{name}.log", rules), BY_NAME[name], rules)


def test_a_removed_signature_is_caught(rules: RuleSet) -> None:
    """Without the signature that decides a kept log, that log is no longer diagnosed as it must be."""
    for exit_ in EXITS:
        decided_by = _diagnose(LOGS / f"{exit_.name}.log", rules).known_issue
        without = RuleSet(tuple(r for r in rules.rules if r.id != decided_by))
        diag = _diagnose(LOGS / f"{exit_.name}.log", without)
        assert diag.known_issue != decided_by
        if decided_by.startswith("gatekeeper-"):  # gatekeeper's own signature carries it: nothing else does
            assert (diag.category, diag.known_issue) != (exit_.category, exit_.known_issue), exit_.name


def _fresh(name: str):  # an exit whose commands may run longer than the suite's timeout gets its own
    limit = BY_NAME[name].timeout
    return pytest.param(name, marks=pytest.mark.timeout(int(limit) + 300)) if limit > 300 else name


@pytest.mark.slow
@pytest.mark.parametrize("name", [_fresh(n) for n in sorted(BY_NAME)])
def test_fresh_exit_is_diagnosed(name: str, tmp_path: Path, request: pytest.FixtureRequest, rules: RuleSet) -> None:
    """Run the command now: its exit code and its current wording, diagnosed."""
    exit_ = BY_NAME[name]
    server = request.getfixturevalue("postgres_server") if exit_.postgres else None
    steps = run(exit_, tmp_path / "job", postgres=f"{server.host}:{server.port}" if server else "")
    assert steps[-1].code == exit_.code, steps[-1].output[-2000:]
    log = tmp_path / "job.log"
    log.write_text(job_log(steps))
    _check(_diagnose(log, rules), exit_, rules)


def test_every_input_error_names_its_fix() -> None:
    """Every bad input's line carries a hint: the fix the diagnosis shows, and the `; hint: ` that the
    gatekeeper-input-error signature reads (a line without one would be diagnosed `unknown`)."""
    import ast

    root = Path(__file__).resolve().parents[2]
    missing = []
    for path in sorted([*(root / "gatekeeper").rglob("*.py"), *(root / "stages").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "InputError":
                hint = (
                    node.args[3]
                    if len(node.args) > 3
                    else next((k.value for k in node.keywords if k.arg == "hint"), None)
                )
                if hint is None or (isinstance(hint, ast.Constant) and not hint.value):
                    missing.append(f"{path.relative_to(root)}:{node.lineno}")
    assert missing == []


def test_the_templates_breaker_refusal_is_diagnosed(tmp_path: Path, rules: RuleSet) -> None:
    """The gate job's own refusal (a stage skipped by its breaker, on a tag or the protected branch: exit 1) is a
    line of ci-templates/gatekeeper.yml, read from there as the job prints it."""
    from tests.analyze.gatekeeper_exits import REPO, Step

    template = (REPO / "ci-templates" / "gatekeeper.yml").read_text(encoding="utf-8")
    (echo,) = [line for line in template.splitlines() if "was skipped by its breaker" in line]
    said = echo.strip().removeprefix('echo "').split('" >&2')[0].replace("$CHANNEL", "nightly")
    log = tmp_path / "gate.log"
    log.write_text(
        job_log([Step(("breaker", "check", "--channel", "nightly", "--job", "gate", "--policy-only"), 1, said)])
    )
    diag = _diagnose(log, rules)
    assert (diag.category, diag.known_issue) == ("infra_error", "gatekeeper-breaker-open")


def test_pipeline_refuses_its_input_before_any_stage_runs(tmp_path: Path) -> None:
    """A gates file evaluate would refuse, and an --out that is a file, end `gatekeeper pipeline` at once (exit 2,
    the hinted line), not after every stage ran (minutes) nor as an internal error (exit 70)."""
    for name in ("pipeline-gates-schema", "pipeline-out-not-a-directory"):
        (step,) = run(BY_NAME[name], tmp_path / name, timeout=120)
        assert step.code == 2, step.output[-2000:]
        assert "== gatekeeper stage" not in step.output
        assert "; hint: " in step.output


def test_a_skipped_bad_end_gets_the_commands_fix_not_more_processes(tmp_path: Path) -> None:
    """A --bad end the command skipped (exit 125) is undecided whatever the budget: the hint says to make the
    command test it; more processes are the hint only for a statistical judge still unsure."""
    (step,) = run(BY_NAME["bisect-bad-end-skipped"], tmp_path / "job", timeout=120)
    assert step.code == 2, step.output[-2000:]
    hint = step.output.split("; hint: ", 1)[1]
    assert hint.startswith("make the command test --bad")
    assert "--max-processes" not in hint
