"""The CI component renders to a valid GitLab pipeline and keeps its promises.

Validation runs on the *rendered* pipeline (inputs interpolated, includes
merged, ``extends`` and ``!reference`` expanded, hidden jobs dropped), because
GitLab's schema lets any hidden key pass (tests/fixtures/gitlab/README.md).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "ci-templates" / "gatekeeper.yml"
CATALOG = ROOT / "templates" / "gatekeeper.yml"
SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "gitlab" / "ci.schema.json").read_text())
STAGES = ["verify_hip", "functional_test", "performance_baseline", "compatibility_check"]
GLOBAL_KEYS = {"variables", "default", "stages", "image", "services", "before_script", "after_script", "cache"}


class _Loader(yaml.SafeLoader):
    pass


def _reference(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    return {"!reference": loader.construct_sequence(node)}


_Loader.add_constructor("!reference", _reference)


def _load_all(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=_Loader))


def split_component(path: Path) -> tuple[dict[str, Any], str]:
    """(inputs spec, body text) of a file with a ``spec:`` header document."""
    text = path.read_text()
    header, sep, body = text.partition("\n---\n")
    if not sep:
        return {}, text
    spec = yaml.safe_load(header)["spec"]
    return spec.get("inputs", {}), body


def interpolate(
    path: Path, given: dict[str, Any] | None = None, component: dict[str, str] | None = None
) -> dict[str, Any]:
    """GitLab's input interpolation: typed values where a ``$[[ ]]`` is the whole value.

    ``component``: the component context (``$[[ component.version ]]`` ...), only for a file
    whose ``spec:`` asks for it, as GitLab refuses it elsewhere.
    """
    spec, body = split_component(path)
    header = yaml.safe_load(path.read_text().partition("\n---\n")[0]) or {}
    wants = set((header.get("spec") or {}).get("component") or [])
    given = dict(given or {})
    unknown = set(given) - set(spec)
    assert not unknown, f"unknown inputs {unknown}"
    values = {}
    for name, decl in spec.items():
        value = given.get(name, decl.get("default"))
        kind = decl.get("type", "string")
        assert value is not None, f"input {name} has no default"
        pytype = {"string": str, "boolean": bool, "number": (int, float), "array": list}[kind]
        assert isinstance(value, pytype), f"input {name}: {value!r} is not a {kind}"
        if "options" in decl:
            assert value in decl["options"], f"input {name}: {value!r} not in {decl['options']}"
        if "regex" in decl:  # GitLab refuses the pipeline when a string input does not match
            assert re.search(decl["regex"], value), f"input {name}: {value!r} does not match {decl['regex']}"
        values[name] = value

    def sub(m: re.Match[str]) -> str:
        value = values[m.group(1)]
        return value if isinstance(value, str) else json.dumps(value)

    text = re.sub(r"\$\[\[\s*inputs\.([A-Za-z0-9_-]+)\s*\]\]", sub, body)
    used = set(re.findall(r"\$\[\[\s*component\.([a-z_]+)\s*\]\]", text))
    assert used <= wants, f"component context {used - wants} used but not asked for in spec: component:"
    if used:
        assert component is not None, "a component file renders only with a component context"
        text = re.sub(r"\$\[\[\s*component\.([a-z_]+)\s*\]\]", lambda m: component.get(m.group(1), ""), text)
    assert "$[[" not in text, "uninterpolated expression left"
    docs = _load_all(text)
    return docs[0] or {}


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """GitLab's merge for extends and includes: hashes merge deeply, everything else is replaced."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _resolve_extends(name: str, jobs: dict[str, Any], seen: tuple[str, ...] = ()) -> dict[str, Any]:
    assert name not in seen, f"extends cycle {seen}"
    job = jobs[name]
    parents = job.get("extends", [])
    parents = [parents] if isinstance(parents, str) else parents
    merged: dict[str, Any] = {}
    for parent in parents:
        assert parent in jobs, f"{name} extends unknown {parent}"
        merged = deep_merge(merged, _resolve_extends(parent, jobs, (*seen, name)))
    return deep_merge(merged, {k: v for k, v in job.items() if k != "extends"})


def _expand_references(node: Any, doc: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if set(node) == {"!reference"}:
            target: Any = doc
            for part in node["!reference"]:
                target = target[part]
            return copy.deepcopy(target)
        return {k: _expand_references(v, doc) for k, v in node.items()}
    if isinstance(node, list):
        out: list[Any] = []
        for item in node:
            value = _expand_references(item, doc)
            # A !reference inside a script list splices its list in (GitLab flattens one level).
            is_ref = isinstance(item, dict) and set(item) == {"!reference"}
            out.extend(value if is_ref and isinstance(value, list) else [value])
        return out
    return node


def render(pipeline: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """Merge local includes (with inputs), then expand extends and !reference; drop hidden jobs."""
    doc: dict[str, Any] = {}
    includes = pipeline.get("include", [])
    for item in [includes] if isinstance(includes, dict | str) else includes:
        inc = {"local": item} if isinstance(item, str) else item
        assert "local" in inc, f"only local includes render offline: {inc}"
        context = inc.get("component_context")
        doc = deep_merge(doc, interpolate(base_dir / inc["local"].lstrip("/"), inc.get("inputs"), context))
    doc = deep_merge(doc, {k: v for k, v in pipeline.items() if k != "include"})
    doc = _expand_references(doc, doc)
    out = {}
    for name, value in doc.items():
        if name.startswith("."):
            continue
        out[name] = _resolve_extends(name, doc) if isinstance(value, dict) and "extends" in value else value
    return out


def validate(doc: dict[str, Any]) -> None:
    validator = jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10])


def _include(**inputs: Any) -> dict[str, Any]:
    return {"include": [{"local": "ci-templates/gatekeeper.yml", **({"inputs": inputs} if inputs else {})}]}


# ---------------------------------------------------------------- the spec


def test_every_input_is_typed_documented_and_defaulted() -> None:
    spec, _ = split_component(TEMPLATE)
    wanted = {
        "model",
        "python_version",
        "rocm_version",
        "channels",
        "gates",
        "gpu_tags",
        "device_required",
        "protected_branch",
        "slack",
        "nightly_index_url",
        "stage_args",
    }
    assert wanted <= set(spec)
    for name, decl in spec.items():
        assert "default" in decl, name
        assert decl.get("description", "").strip(), name
        assert decl.get("type", "string") in {"string", "boolean", "number", "array"}, name


@pytest.mark.parametrize(
    "inputs",
    [
        {},
        {"device_required": True, "gpu_tags": ["rocm", "mi300"], "slack": True, "channels": ["stable"]},
        {"model": "pkg.models:build", "gates": "ci/gates.yaml", "protected_branch": "rel", "stage_args": "--seed 1"},
        {"version": "1.2.3", "image": "$CI_REGISTRY/platform/gatekeeper/cpu:$GATEKEEPER_VERSION", "install": ""},
        {"functional_test_args": "--opinfo", "nightly_blocking": True, "baseline": "sqlite:h.db"},
        {"parity": True, "device_required": True},
        {"parity": True, "parity_golden_job": "cuda-golden"},
    ],
    ids=["no-inputs", "gpu", "custom", "version", "per-stage", "parity", "parity-foreign-golden"],
)
def test_rendered_template_is_valid_gitlab_ci(inputs: dict[str, Any]) -> None:
    validate(render(_include(**inputs), ROOT))


def test_repository_pipeline_is_valid_gitlab_ci() -> None:
    pipeline = yaml.load((ROOT / ".gitlab-ci.yml").read_text(), Loader=_Loader)
    rendered = render(pipeline, ROOT)
    validate(rendered)
    assert {"lint", "tests"} <= set(rendered), "own pipeline has lint and tests jobs"
    assert "gatekeeper:gate" in rendered


def test_template_has_no_global_keywords_and_prefixed_jobs() -> None:
    _, body = split_component(TEMPLATE)
    raw = _load_all(re.sub(r"\$\[\[[^\]]*\]\]", "x", body))[0]
    assert not GLOBAL_KEYS & set(raw), "global keywords leak into the including pipeline"
    for name in raw:
        assert name.startswith(("gatekeeper:", ".gatekeeper:")), name


# ---------------------------------------------------------------- job structure


@pytest.fixture(scope="module")
def jobs() -> dict[str, Any]:
    return render(_include(), ROOT)


def test_stage_jobs_are_ordered_and_matrixed_over_channels(jobs: dict[str, Any]) -> None:
    prev = None
    for stage in STAGES:
        job = jobs[f"gatekeeper:{stage}"]
        assert job["parallel"]["matrix"] == [{"CHANNEL": ["stable", "nightly"]}]
        assert job["variables"]["GATEKEEPER_STAGE"] == stage
        assert job.get("needs", []) == ([{"job": f"gatekeeper:{prev}", "optional": True}] if prev else [])
        assert job["variables"].get("GATEKEEPER_AFTER") == prev
        # later stages run whatever the other channel did, and check their own channel's upstream
        assert job["rules"][-1] == {"when": "always" if prev else "on_success"}
        assert any('gatekeeper stage "$GATEKEEPER_STAGE" --device auto' in line for line in job["script"])
        assert job["allow_failure"] == {"exit_codes": [4]}
        assert "artifacts/*/*.junit.xml" in job["artifacts"]["reports"]["junit"]
        assert any("$GATEKEEPER_STAGE_ARGS" in line for line in job["script"])
        assert job["artifacts"]["when"] == "always"
        prev = stage


def test_nightly_never_on_tags_and_unprotected_mrs_may_fail(jobs: dict[str, Any]) -> None:
    for name in [*(f"gatekeeper:{s}" for s in STAGES), "gatekeeper:gate"]:
        rules = jobs[name]["rules"]
        assert rules[0] == {"if": '$CHANNEL == "nightly" && $CI_COMMIT_TAG', "when": "never"}
        mr = next(r for r in rules if '$CI_MERGE_REQUEST_TARGET_BRANCH_NAME != "main"' in r.get("if", ""))
        assert '$CI_MERGE_REQUEST_TARGET_BRANCH_NAME != "main"' in mr["if"]
        assert mr["allow_failure"] is True
        # the nightly channel is advisory on merge requests unless nightly_blocking
        nightly = next(r for r in rules if r.get("if", "").startswith('$CHANNEL == "nightly" && $CI_PIPELINE'))
        assert nightly["if"] == (
            '$CHANNEL == "nightly" && $CI_PIPELINE_SOURCE == "merge_request_event" '
            '&& $GATEKEEPER_NIGHTLY_BLOCKING != "true"'
        )
        assert nightly["allow_failure"] is True
        assert jobs[name]["variables"]["GATEKEEPER_NIGHTLY_BLOCKING"] == "false"


def test_nightly_blocking_input_reaches_the_rule_variable() -> None:
    jobs = render(_include(nightly_blocking=True), ROOT)
    for name in [*(f"gatekeeper:{s}" for s in STAGES), "gatekeeper:gate"]:
        assert jobs[name]["variables"]["GATEKEEPER_NIGHTLY_BLOCKING"] == "true"


def test_gate_job(jobs: dict[str, Any]) -> None:
    gate = jobs["gatekeeper:gate"]
    assert gate["allow_failure"] == {"exit_codes": [3, 4]}
    # on tags, the protected branch and merge requests into it no failure code is allowed and a
    # breaker-skipped stage blocks (exit 1, not the skip code); tests/test_ci_allow_failure.py per context
    strict = gate["rules"][3]
    assert strict == {
        "if": '$CI_COMMIT_TAG || ($CI_PIPELINE_SOURCE != "merge_request_event" && $CI_COMMIT_BRANCH == "main") '
        '|| $CI_MERGE_REQUEST_TARGET_BRANCH_NAME == "main"',
        "when": "always",
        "allow_failure": False,
        "variables": {"GATEKEEPER_SKIP_BLOCKS": "true"},
    }
    check = next(line for line in gate["script"] if "breaker check" in line)
    assert '[ "$rc" = 4 ] && [ "${GATEKEEPER_SKIP_BLOCKS:-}" = true ]' in check
    assert "exit 1" in check
    assert gate["rules"][-1] == {"when": "always"}
    assert {n["job"] for n in gate["needs"]} == {f"gatekeeper:{s}" for s in STAGES}
    assert all(n["optional"] for n in gate["needs"])
    reports = gate["artifacts"]["reports"]
    assert reports["junit"]
    assert reports["metrics"]
    assert "artifacts/" in gate["artifacts"]["paths"], "report files must also be plain artifacts"
    assert any("gatekeeper evaluate" in line for line in gate["script"])


def test_failure_job(jobs: dict[str, Any]) -> None:
    job = jobs["gatekeeper:diagnose"]
    # always: a red pipeline is diagnosed, a green one after red ones announces the recovery (issue 28)
    assert job["rules"] == [{"when": "always"}]
    assert job["allow_failure"] is True, "the diagnosis never fails a pipeline"
    assert all(n["optional"] for n in job["needs"])
    assert len(job["needs"]) == 6
    assert {"job": "gatekeeper:report", "optional": True} in job["needs"]
    script = "\n".join(job["script"])
    assert "GATEKEEPER_REPORT_URL" in script, "the MR note and Slack alert link the report"
    assert "artifacts/*/analysis.json" in job["artifacts"]["paths"]
    assert "gatekeeper analyze" in script
    assert "gatekeeper notify gitlab" in script
    assert "after_script" not in job, "with --shell-isolation after_script wipes outputs"
    # what docs/failure_analysis.md says the job does: the bundle, the alert state and the spool, kept in the cache
    assert "--only-failed" in script
    assert "--bundle" in script
    assert "--state" in script
    assert "--spool" in script
    assert "notify --resend" in script
    assert "artifacts/*/repro/" in job["artifacts"]["paths"]
    (cache,) = job["cache"]
    assert cache["paths"] == [".gatekeeper-alerts/"]
    assert cache["when"] == "always"
    assert "$GATEKEEPER_ALERTS/state.json" in script
    assert job["variables"]["GATEKEEPER_ALERTS"] == ".gatekeeper-alerts"


def test_cache_is_keyed_and_inside_the_project(jobs: dict[str, Any]) -> None:
    for stage in STAGES:
        job = jobs[f"gatekeeper:{stage}"]
        kernels, wheels = job["cache"]
        key = kernels["key"]
        for part in ("$GATEKEEPER_STAGE", "$CHANNEL", "py3.11", "rocm6.2", "gfx942"):
            assert part in key
        assert wheels["key"] == "gatekeeper-wheels-$CHANNEL-py3.11-rocm6.2"
        assert wheels["paths"] == [".gatekeeper-wheels/"]
        for cache in (kernels, wheels):
            assert cache["when"] == "always"
            for path in cache["paths"]:
                assert not path.startswith(("/", "..", "$")), path
        assert not job["variables"]["GATEKEEPER_CACHE_DIR"].startswith("/")
        assert 'eval "$(gatekeeper cache env --keep-inductor-headers)"' in job["before_script"]
        assert 'export TMPDIR="$PWD/.gatekeeper-tmp" && mkdir -p "$TMPDIR"' in job["before_script"]


def test_device_required_selects_gpu_runners() -> None:
    cpu = render(_include(device_required=False), ROOT)["gatekeeper:verify_hip"]
    gpu = render(_include(gpu_tags=["mi300"]), ROOT)["gatekeeper:verify_hip"]  # device_required: true by default
    assert "tags" not in cpu
    assert cpu["variables"]["GATEKEEPER_REQUIRE_DEVICE"] == "0"
    assert gpu["tags"] == ["mi300"]
    assert gpu["variables"]["GATEKEEPER_REQUIRE_DEVICE"] == "1"
    # The gate evaluates the device-required gate, so it sees the variable too; it needs no GPU runner.
    gate = render(_include(device_required=True, gpu_tags=["mi300"]), ROOT)["gatekeeper:gate"]
    assert "tags" not in gate
    assert gate["variables"]["GATEKEEPER_REQUIRE_DEVICE"] == "1"


def test_unknown_or_mistyped_inputs_are_refused() -> None:
    with pytest.raises(AssertionError, match="unknown inputs"):
        render(_include(modle="x:y"), ROOT)
    with pytest.raises(AssertionError, match="not a boolean"):
        render(_include(device_required="yes"), ROOT)


def test_catalog_copy_agrees_with_ci_templates() -> None:
    from scripts.sync_catalog import catalog_text

    assert CATALOG.read_text() == catalog_text(TEMPLATE.read_text()), "run: python scripts/sync_catalog.py"
    # the only differences: the component context is asked for and reaches the jobs
    spec = yaml.safe_load(CATALOG.read_text().partition("\n---\n")[0])["spec"]
    assert spec["component"] == ["name", "sha", "version"]
    assert '"$[[ component.version ]]"' in CATALOG.read_text()
    assert "$[[ component." not in TEMPLATE.read_text(), "local:/project: includes refuse the component context"


def test_docs_describe_every_input() -> None:
    spec, _ = split_component(TEMPLATE)
    docs = (ROOT / "docs" / "ci.md").read_text()
    missing = [name for name in spec if f"| `{name}` |" not in docs]
    assert not missing, f"docs/ci.md does not document inputs {missing}"


# ---------------------------------------------------------------- soak (issue 17)


def _soak_script(job: dict[str, Any]) -> str:
    return next(line for line in job["script"] if "GATEKEEPER_SOAK_DURATION" in line)


def _soak_args(job: dict[str, Any], environ: dict[str, str]) -> tuple[str, str]:
    """Run the job's soak step in bash: (the arguments it adds to the stage command, what it printed)."""
    import subprocess

    script = _soak_script(job) + '\nprintf "ARGS=%s\\n" "$soak"\n'
    env = {"PATH": "/usr/bin:/bin", **environ}
    out = subprocess.run(["bash", "-ec", script], env=env, capture_output=True, text=True, timeout=30, check=True)
    args = next(line for line in out.stdout.splitlines() if line.startswith("ARGS="))[5:]
    return args, out.stdout


def test_soak_is_off_by_default_and_runs_on_schedules_only() -> None:
    default = render(_include(), ROOT)["gatekeeper:performance_baseline"]
    assert default["variables"]["GATEKEEPER_SOAK_DURATION"] == ""
    args, _ = _soak_args(default, {"CI_PIPELINE_SOURCE": "schedule"})
    assert args == ""  # no input, no soak, even on a schedule

    job = render(_include(soak_duration="24h"), ROOT)["gatekeeper:performance_baseline"]
    assert job["variables"]["GATEKEEPER_SOAK_DURATION"] == "24h"
    stage_cmd = next(line for line in job["script"] if line.startswith('gatekeeper stage "$GATEKEEPER_STAGE"'))
    assert " $soak " in stage_cmd
    args, _ = _soak_args(job, {"CI_PIPELINE_SOURCE": "schedule", "GATEKEEPER_SOAK_DURATION": "24h"})
    assert args == "--duration 24h"
    for source in ("push", "merge_request_event", "web"):
        args, said = _soak_args(job, {"CI_PIPELINE_SOURCE": source, "GATEKEEPER_SOAK_DURATION": "24h"})
        assert args == ""
        assert "scheduled pipelines only" in said
    # only performance_baseline soaks
    for stage in ("verify_hip", "functional_test", "compatibility_check"):
        other = render(_include(soak_duration="24h"), ROOT)[f"gatekeeper:{stage}"]
        assert "GATEKEEPER_SOAK_DURATION" not in other["variables"]


def test_soak_duration_must_be_a_duration() -> None:
    with pytest.raises(AssertionError, match="does not match"):
        render(_include(soak_duration="24h; rm -rf /"), ROOT)
    render(_include(soak_duration="90m"), ROOT)


# ---------------------------------------------------------------- cross-stack parity


def _runs(job: dict[str, Any], variables: dict[str, str]) -> bool:
    """Evaluate the job's rules for the few expressions the parity jobs use (first match wins)."""
    env = {**job.get("variables", {}), **variables}
    for rule in job["rules"]:
        cond = rule.get("if")
        if cond is None:
            return rule.get("when", "on_success") != "never"
        ok = False
        for alternative in cond.split(" || "):
            terms = [t.strip() for t in alternative.split(" && ")]
            ok = ok or all(_term(t, env) for t in terms)
        if ok:
            return rule.get("when", "on_success") != "never"
    return False


def _term(term: str, env: dict[str, str]) -> bool:
    m = re.fullmatch(r'\$(\w+) (==|!=) "([^"]*)"', term)
    if m:
        equal = env.get(m.group(1), "") == m.group(3)
        return equal if m.group(2) == "==" else not equal
    assert re.fullmatch(r"\$\w+", term), term
    return bool(env.get(term[1:]))


def test_parity_jobs_are_off_by_default(jobs: dict[str, Any]) -> None:
    for name in ("gatekeeper:golden", "gatekeeper:parity"):
        assert not _runs(jobs[name], {"CHANNEL": "nightly", "CI_PIPELINE_SOURCE": "push"}), name


def test_parity_saves_a_stable_golden_and_compares_every_channel() -> None:
    rendered = render(_include(parity=True, device_required=True, gpu_tags=["mi300"]), ROOT)
    golden, parity = rendered["gatekeeper:golden"], rendered["gatekeeper:parity"]
    assert _runs(golden, {"CI_PIPELINE_SOURCE": "push"})
    save = " ".join(golden["script"])
    assert "gatekeeper stage functional_test" in save
    assert "--channel stable" in save
    assert "--golden-save artifacts/golden" in save
    assert "artifacts/golden/" in golden["artifacts"]["paths"]
    assert golden["tags"] == parity["tags"] == ["mi300"]  # the same stack as the stage jobs
    assert parity["parallel"]["matrix"] == [{"CHANNEL": ["stable", "nightly"]}]
    assert parity["needs"] == [{"job": "gatekeeper:golden", "artifacts": True, "optional": True}]
    script = "\n".join(parity["script"])
    assert "--golden artifacts/golden" in script
    assert '--channel "$CHANNEL"' in script
    assert "pip install --quiet --pre --upgrade" in script  # nightly gets the nightly wheel first
    assert script.index("--pre --upgrade") < script.index("--golden artifacts/golden")
    assert _runs(parity, {"CHANNEL": "nightly", "CI_PIPELINE_SOURCE": "push"})
    assert not _runs(parity, {"CHANNEL": "nightly", "CI_COMMIT_TAG": "v1", "CI_PIPELINE_SOURCE": "push"})
    assert parity["artifacts"]["reports"]["junit"] == "artifacts/parity/*/*.junit.xml"


def test_parity_against_another_stacks_golden_job() -> None:
    rendered = render(_include(parity=True, parity_golden_job="cuda-golden"), ROOT)
    assert not _runs(rendered["gatekeeper:golden"], {"CI_PIPELINE_SOURCE": "push"})  # the named job makes it
    parity = rendered["gatekeeper:parity"]
    assert parity["needs"] == [{"job": "cuda-golden", "artifacts": True, "optional": True}]
    assert _runs(parity, {"CHANNEL": "stable", "CI_PIPELINE_SOURCE": "push"})


def test_stage_jobs_still_install_the_nightly_torch(jobs: dict[str, Any]) -> None:
    script = "\n".join(jobs["gatekeeper:functional_test"]["script"])
    assert script.index("--pre --upgrade") < script.index('gatekeeper stage "$GATEKEEPER_STAGE"')


def test_parity_flags_win_over_the_functional_test_args() -> None:
    rendered = render(_include(parity=True, functional_test_args="--categories basic_math --seeds 50"), ROOT)
    for name, flag in (("gatekeeper:golden", "--golden-save"), ("gatekeeper:parity", "--golden ")):
        script = "\n".join(rendered[name]["script"])
        # the same model configuration on both sides, and argparse's last --categories is ours
        assert script.index("--categories basic_math") < script.index("--categories none") < script.index(flag)


# ---------------------------------------------------------------- GPU check (issue 26)


def test_gpu_check_job_is_opt_in_and_runs_the_gpu_check_on_the_gpu_runners(jobs: dict[str, Any]) -> None:
    assert not _runs(jobs["gatekeeper:gpu_check"], {"CI_PIPELINE_SOURCE": "push"})
    job = render(_include(gpu_check=True, gpu_tags=["mi300"], model="pkg.m:build"), ROOT)["gatekeeper:gpu_check"]
    assert _runs(job, {"CI_PIPELINE_SOURCE": "push"})
    assert job["tags"] == ["mi300"]  # the stage jobs' GPU runners
    script = "\n".join(job["script"])
    assert "gatekeeper gpu-check --out artifacts/gpu_check" in script
    assert '--model "$GATEKEEPER_MODEL"' in script
    assert job["artifacts"]["paths"] == ["artifacts/gpu_check/"]
    assert job["allow_failure"] == {"exit_codes": [3]}  # warnings only: a blocked check stays red
