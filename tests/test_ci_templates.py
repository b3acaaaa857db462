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


def interpolate(path: Path, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """GitLab's input interpolation: typed values where a ``$[[ ]]`` is the whole value."""
    spec, body = split_component(path)
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
        values[name] = value

    def sub(m: re.Match[str]) -> str:
        value = values[m.group(1)]
        return value if isinstance(value, str) else json.dumps(value)

    text = re.sub(r"\$\[\[\s*inputs\.([A-Za-z0-9_-]+)\s*\]\]", sub, body)
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
        doc = deep_merge(doc, interpolate(base_dir / inc["local"].lstrip("/"), inc.get("inputs")))
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
    ],
    ids=["no-inputs", "gpu", "custom"],
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
        assert job["artifacts"]["when"] == "always"
        prev = stage


def test_nightly_never_on_tags_and_unprotected_mrs_may_fail(jobs: dict[str, Any]) -> None:
    for name in [*(f"gatekeeper:{s}" for s in STAGES), "gatekeeper:gate"]:
        rules = jobs[name]["rules"]
        assert rules[0] == {"if": '$CHANNEL == "nightly" && $CI_COMMIT_TAG', "when": "never"}
        mr = next(r for r in rules if "merge_request_event" in r.get("if", ""))
        assert '$CI_MERGE_REQUEST_TARGET_BRANCH_NAME != "main"' in mr["if"]
        assert mr["allow_failure"] is True


def test_gate_job(jobs: dict[str, Any]) -> None:
    gate = jobs["gatekeeper:gate"]
    assert gate["allow_failure"] == {"exit_codes": [3, 4]}
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
    assert job["rules"] == [{"when": "on_failure"}]
    assert all(n["optional"] for n in job["needs"])
    assert len(job["needs"]) == 5
    script = "\n".join(job["script"])
    assert "artifacts/*/analysis.json" in job["artifacts"]["paths"]
    assert "gatekeeper analyze" in script
    assert "gatekeeper notify gitlab" in script
    assert "after_script" not in job, "with --shell-isolation after_script wipes outputs"


def test_cache_is_keyed_and_inside_the_project(jobs: dict[str, Any]) -> None:
    for stage in STAGES:
        job = jobs[f"gatekeeper:{stage}"]
        cache = job["cache"]
        key = cache["key"]
        for part in ("$CI_JOB_NAME_SLUG", "py3.11", "rocm6.2", "gfx942"):
            assert part in key
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
    assert CATALOG.read_text() == TEMPLATE.read_text(), "run: python scripts/sync_catalog.py"


def test_docs_describe_every_input() -> None:
    spec, _ = split_component(TEMPLATE)
    docs = (ROOT / "docs" / "ci.md").read_text()
    missing = [name for name in spec if f"| `{name}` |" not in docs]
    assert not missing, f"docs/ci.md does not document inputs {missing}"
