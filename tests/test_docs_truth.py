"""What people see is what the docs say: claims in README.md and docs/ that tests can hold
to the repository (fixtures called real, the report picture, the template's process count,
the GitLab section of the README)."""

from __future__ import annotations

import json
import re

import yaml

from tests.conftest import REPO
from tests.test_ci_templates import split_component

DOCS = {p.relative_to(REPO).as_posix(): p.read_text() for p in [REPO / "README.md", *(REPO / "docs").glob("*.md")]}
README = DOCS["README.md"]


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def test_synthetic_fixtures_are_named_and_indexed_so() -> None:
    for index in (REPO / "tests" / "fixtures").rglob("index.jsonl"):
        for line in index.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("synthetic"):
                assert "synthetic" in entry["file"], f"{index}: {entry['file']} is synthetic but not named so"
            else:
                assert "synthetic" not in entry["file"], f"{index}: {entry['file']}"


def test_no_paragraph_calls_the_fixtures_real_without_the_synthetic_ones() -> None:
    synthetic = [
        json.loads(line)["file"]
        for index in (REPO / "tests" / "fixtures").rglob("index.jsonl")
        for line in index.read_text().splitlines()
        if json.loads(line).get("synthetic")
    ]
    assert synthetic, "the nvidia-smi samples are synthetic"
    for name, text in DOCS.items():
        for para in _paragraphs(text):
            flat = " ".join(para.split())
            if re.search(r"(fixtures|files)\b.{0,60}\breal captured", flat) and (
                "tests/fixtures/`" in flat or "tests/fixtures/env" in flat or "files are real" in flat
            ):
                assert "synthetic" in flat, f"{name}: {flat[:200]}"


def test_the_report_picture_says_it_is_synthetic() -> None:
    for name, text in DOCS.items():
        for alt in re.findall(r"!\[([^\]]*)\]\([^)]*report\.png\)", text):
            assert "synthetic" in alt or "real demo run" in alt, f"{name}: {alt}"


def test_performance_doc_states_what_the_template_passes() -> None:
    spec, _ = split_component(REPO / "ci-templates" / "gatekeeper.yml")
    passed = spec["performance_baseline_args"]["default"] + " " + spec["stage_args"]["default"]
    line = next(line for line in DOCS["docs/performance.md"].splitlines() if line.startswith("| `--processes`"))
    m = re.search(r"--processes\s+(\d+)", passed)
    if m:
        assert f"passes {m.group(1)}" in line, line
    else:
        assert "passes none" in line, line
        assert not re.search(r"passes \d+", line), line


def test_readme_shows_the_catalog_include_in_five_lines() -> None:
    section = README[README.index("## Use it in GitLab CI") : README.index("## The stages")]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block
    lines = block.group(1).strip().splitlines()
    assert len(lines) == 5, lines
    doc = yaml.safe_load(block.group(1))
    include = doc["include"][0]
    assert re.fullmatch(r"\$CI_SERVER_FQDN/[\w./-]+/gatekeeper@\d+\.\d+\.\d+", include["component"])
    spec, _ = split_component(REPO / "ci-templates" / "gatekeeper.yml")
    assert set(include.get("inputs", {})) <= set(spec)


def test_readme_says_which_features_need_which_tier() -> None:
    section = README[README.index("## Use it in GitLab CI") : README.index("## The stages")]
    rows = [r for r in section.splitlines() if r.startswith("| ") and not r.startswith("| ---")]
    tiers = {r.split("|")[1].strip(): r.split("|")[2].strip() for r in rows[1:]}
    metrics = next(v for k, v in tiers.items() if "metrics report" in k)
    assert "Free" not in metrics, "the metrics report widget is not in the Free tier"
    assert any("JUnit" in k and v == "Free" for k, v in tiers.items())
