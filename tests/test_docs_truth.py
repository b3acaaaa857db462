"""What people see is what the docs say: claims in README.md and docs/ that tests can hold
to the repository (fixtures called real, the report picture, the template's process count,
the GitLab section of the README)."""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from gatekeeper.core import proc
from gatekeeper.evaluate.gates import load_gates
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


# --- Every command example in README.md and docs/ runs (issue 28) -----------------------------------
#
# Every line of a ```sh/```bash block, and every "$ " line of a ```console block, is an example. By
# default it RUNS here, in a sandbox holding what the examples name (artifacts of a verify_hip
# pipeline, a history store, a job log, gates.yaml, matrix.yaml), in the docs' order, and must
# neither be refused (exit 2: usage or input), crash (70), be missing (126/127) nor time out. An
# example that cannot run here (a GPU, the network, minutes of CPU) is listed below with the reason:
# PARSE_ONLY examples are parsed by the command's own argument parser (so an option the command
# does not have still fails), NOT_RUN ones are only named. A new example is picked up by itself;
# one that cannot run here fails this test until it is listed.

NOT_RUN: dict[str, str] = {
    r"^make demo\b": "the whole pipeline on the demo model takes minutes; its exit codes are held by "
    "test_make_demo_exit_codes (make with a stub gatekeeper)",
    r"^make test\b": "the whole suite, this test included",
    r"^pip install\b": "installs from a package index over the network",
    r"^kubectl\b": "needs a Kubernetes cluster",
    r"\bdoctor gitlab\b": "needs a GitLab API and a token (tests/machine/test_gitlab_settings.py drives it "
    "against a local fake)",
    r"gitlab-ci-local|setup_ci_tools": "runs GitLab pipelines for minutes: tests/pipelines/",
    r"--device cuda\b": "needs a GPU",
    r"^gatekeeper ab\b": "times two commits in worktrees for minutes: tests/run/test_ab.py",
    r"--duration 24h": "a 24-hour soak run",
    r"train_analyze_model\.py(?!.*--check)": "rebuilds the learned model: needs scikit-learn (the ml extra) "
    "and minutes; tests/analyze/test_analyze_model.py runs it",
    r"benchmarks/analyze_accuracy\.py": "classifies the 664 corpus logs (minutes); "
    "tests/analyze/test_analyze_classify.py holds its figures",
    r"^scripts/gpu_check\.sh\b": "execs gatekeeper gpu-check, which runs every stage (about 5 minutes on this "
    "CPU): tests/run/test_gpu_check.py drives it with the pipeline replaced, the pipeline's own tests run it",
}
PARSE_ONLY: dict[str, str] = {
    r"^(gatekeeper stage|python -m stages\.)\s*(functional_test|performance_baseline|compatibility_check)\b"
    r"(?!.*--help)": "a full stage run takes minutes on this CPU",
    r"^gatekeeper pipeline\b": "runs every stage for minutes (the sandbox's own pipeline runs verify_hip)",
    r"^gatekeeper gpu-check\b": "runs every stage (about 5 minutes on this CPU); tests/run/test_gpu_check.py "
    "drives it with the pipeline replaced",
    r"^gatekeeper bisect\b": "bisects a repository's history, a stage run per candidate (minutes); "
    "tests/bisect/test_docs_bisect.py and test_git.py run the documented bisections",
    r"^gatekeeper notify issue\b": "files the issue of a finished bisection in GitLab; "
    "tests/bisect/test_docs_bisect.py files it against a local fake GitLab",
    r"history import --from artifacts/stable/history-spool\.jsonl": "needs a record a failed --record "
    "spooled and the job's store variable; tests/history/test_store_bad_input.py spools and imports one",
    r"^gatekeeper history platforms\b": "needs runs of one commit on two platforms, named by $CI_COMMIT_SHA; "
    "tests/history/test_platforms.py records them and runs it",
}


@dataclasses.dataclass(frozen=True)
class Example:
    doc: str
    line: int
    command: str

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}: {self.command[:90]}"


def _fenced_blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """(language, first line number, lines) of every fenced block."""
    out: list[tuple[str, int, list[str]]] = []
    lang: str | None = None
    body: list[str] = []
    start = 0
    for n, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^\s*```(\S*)\s*$", line)
        if fence and lang is None:
            lang, body, start = fence.group(1), [], n + 1
        elif fence and lang is not None and not fence.group(1):
            out.append((lang, start, body))
            lang = None
        elif lang is not None:
            body.append(line)
    return out


def doc_examples() -> list[Example]:
    found: list[Example] = []
    for doc, text in DOCS.items():
        for lang, start, body in _fenced_blocks(text):
            if lang not in ("sh", "bash", "console"):
                continue
            if lang in ("sh", "bash") and any(re.match(r"^\s*(for|while|if)\b", line) for line in body):
                found.append(Example(doc, start, "\n".join(body)))  # a shell program: one example
                continue
            joined = re.sub(r"\\\n\s*", " ", "\n".join(body))
            for offset, line in enumerate(joined.splitlines()):
                command = line.strip()
                if lang == "console":
                    if not command.startswith("$ ") or command in ("$ echo $?",):
                        continue  # output lines
                    command = command[2:]
                if command and not command.startswith("#"):
                    found.append(Example(doc, start + offset, command))
    return found


def _listed(command: str, table: dict[str, str]) -> str | None:
    return next((why for pattern, why in table.items() if re.search(pattern, command)), None)


def _synopsis(command: str) -> str:
    """A synopsis line's optional parts (``[--json]``, ``[--failures 3 --cooldown 24h]``) left out."""
    return re.sub(r"\s+\[[^\]]*\]", "", command)


def _argv(command: str) -> list[str]:
    argv = shlex.split(_synopsis(command), comments=True)
    while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):
        argv.pop(0)  # VAR=value prefixes
    return argv


def _parse_only(command: str) -> None:
    """Parse ``command`` with the argument parsers of the command (and of a stage) without running it."""
    from gatekeeper.cli import build_parser
    from stages import load_stage
    from stages._stage import build_parser as stage_parser

    argv = _argv(command)
    if argv[:2] == ["python", "-m"] and argv[2].startswith("stages."):
        stage_parser(load_stage(argv[2].split(".", 1)[1])).parse_args(argv[3:])
        return
    assert argv[0] == "gatekeeper", command
    args = build_parser().parse_args(argv[1:])
    if args.command == "stage":
        stage_parser(load_stage(args.name)).parse_args(args.stage_args)
    if args.command == "pipeline":
        for item in args.stage_arg or ():
            name, _, rest = item.partition("=")
            stage_parser(load_stage(name)).parse_args(shlex.split(rest))


EXAMPLES = doc_examples()
SANDBOX_STAGES = "verify_hip"


def test_examples_are_found_and_every_listing_is_still_used() -> None:
    assert len(EXAMPLES) > 60, len(EXAMPLES)
    for table in (NOT_RUN, PARSE_ONLY):
        for pattern in table:
            assert any(re.search(pattern, e.command) for e in EXAMPLES), f"no example matches {pattern!r} any more"


@pytest.mark.parametrize(
    "example", [e for e in EXAMPLES if _listed(e.command, PARSE_ONLY) and not _listed(e.command, NOT_RUN)],
    ids=lambda e: e.id,
)  # fmt: skip
def test_a_parse_only_example_parses(example: Example) -> None:
    try:
        _parse_only(example.command)
    except SystemExit as err:
        pytest.fail(f"{example.id}: its command refuses these arguments (exit {err.code})")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A directory holding what the examples name, and the environment they run in (no CI, no secrets)."""
    box = tmp_path_factory.mktemp("docs-examples")
    for name in ("gates.yaml", "matrix.yaml"):
        shutil.copy(REPO / name, box / name)
    log = REPO / "tests" / "fixtures" / "logs" / "compile_error__pytorch-106513-cppcompileerror.log"
    shutil.copy(log, box / "job.log")
    (box / "job.log.gz").write_bytes(gzip.compress(log.read_bytes()))
    (box / "known-issues.yaml").write_text(
        "issues:\n  - id: my-issue\n    category: numerical_mismatch\n    priority: 50\n"
        "    patterns: ['my known drift']\n    explanation: A drift we know.\n    remediation: [Waive it.]\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CI", "GITLAB", "GATEKEEPER_", "SLACK"))}
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        HOME=str(box),
        GATEKEEPER_CACHE_DIR=str(box / ".gatekeeper-cache"),
        PYTHONPATH=str(REPO),  # `python scripts/...` and `python -m stages...` from this checkout
    )
    res = proc.run(
        ["gatekeeper", "pipeline", "--device", "cpu", "--out", "artifacts", "--stages", SANDBOX_STAGES,
         "--record", "sqlite:history.db"],
        timeout=600, cwd=box, env=env,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    # the store the history examples name (the template's default place)
    (box / ".gatekeeper").mkdir()
    shutil.copy(box / "history.db", box / ".gatekeeper" / "history.db")
    # what the examples pass to notify: an analysis of the run (the failure job writes one when it fails)
    res = proc.run(
        ["gatekeeper", "analyze", "--artifacts", "artifacts", "--format", "json", "--out", "artifacts/analysis.json"],
        timeout=300, cwd=box, env=env,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    for folder in ("scripts", "benchmarks"):  # `python scripts/...` as from the repository's root
        (box / folder).symlink_to(REPO / folder)
    shutil.copytree(box / "artifacts", box / "artifacts" / "stable")
    shutil.copytree(box / "artifacts", box / "artifacts" / "nightly", ignore=shutil.ignore_patterns("stable"))
    return box, env


def _run_example(example: Example, box: Path, env: dict[str, str]) -> proc.ProcResult:
    if "\n" in example.command:
        # a shell program (a walkthrough) starts from its own empty directory: its store holds its runs only
        box = box / f"program-{Path(example.doc).stem}-{example.line}"
        box.mkdir(exist_ok=True)
        shutil.copy(REPO / "matrix.yaml", box / "matrix.yaml")
        return proc.run(["bash", "-c", example.command], timeout=900, cwd=box, env=env)
    return proc.run(["bash", "-c", _synopsis(example.command)], timeout=300, cwd=box, env=env)


_RAN: dict[str, proc.ProcResult] = {}  # example id -> its result, for the tests of what the docs say it does


@pytest.mark.slow
@pytest.mark.parametrize("doc", list(DOCS))
def test_every_runnable_example_runs(doc: str, sandbox: tuple[Path, dict[str, str]]) -> None:
    box, env = sandbox
    failures = []
    for example in (e for e in EXAMPLES if e.doc == doc):
        if _listed(example.command, NOT_RUN) or _listed(example.command, PARSE_ONLY):
            continue
        res = _RAN[example.id] = _run_example(example, box, env)
        refused = res.returncode in (2, 70, 126, 127) or res.timed_out or "Traceback" in res.stderr
        if refused:
            failures.append(f"{example.id}\n  -> {res.describe()}: {(res.stderr or res.stdout).strip()[-600:]}")
    assert not failures, "examples that do not run (fix the doc or the command, or list them with a reason):\n" + (
        "\n".join(failures)
    )


@pytest.mark.slow
def test_the_release_walkthrough_says_what_its_commands_do(sandbox: tuple[Path, dict[str, str]]) -> None:
    box, env = sandbox
    text = DOCS["docs/release.md"]
    (walk,) = [e for e in EXAMPLES if e.doc == "docs/release.md" and "\n" in e.command]
    res = _RAN.get(walk.id) or _run_example(walk, box, env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    where = box / f"program-release-{walk.line}"
    ids = [int(x) for x in re.findall(r"runs/(\d+)", walk.command) if x != "$n"]
    runs = sorted(p.name for p in (where / "runs").iterdir())
    assert runs == ["501", "502", "503", "504"], runs
    assert max(ids) == 504, "the report reads the last run"
    results = {json.loads((where / "runs" / r / "verdict.json").read_text())["result"] for r in runs}
    assert "every run passes" in " ".join(text.split())
    assert results == {"pass"}, results
    # the matrix rows the doc shows, dates aside
    shown = re.findall(r"^\| (2\.\S+ \(\w+\)) \| (\S+ \w+) \S+ \[#(\d+)\]", text, re.MULTILINE)
    made = re.findall(
        r"^\| (2\.\S+ \(\w+\)) \| (\S+ \w+) \S+ \[#(\d+)\]", (where / "matrix" / "matrix.md").read_text(), re.MULTILINE
    )
    assert shown
    assert [(t.split("+")[1], v, n) for t, v, n in shown] == [(t.split("+")[1], v, n) for t, v, n in made]
    # the advice, line for line
    walkthrough = text[text.index("## Walkthrough") :]
    block = walkthrough[walkthrough.index("```\ndecision:") + 4 :]
    advice = block[: block.index("```")].strip().splitlines()
    printed = res.stdout[res.stdout.index("decision:") :].strip().splitlines()[: len(advice)]
    assert printed == advice


def test_make_demo_exit_codes(tmp_path: Path) -> None:
    """README: make demo exits 0 on pass or warn; when a gate blocks, make exits 2 (its own code)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    flat = " ".join(README.split())
    assert "when a gate blocks, `gatekeeper pipeline` exits 1 and make stops with its own exit code, 2" in flat
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").touch()  # newer than pyproject.toml: make does not set up a venv
    os.utime(venv / ".installed", (2**31, 2**31))
    stub = venv / "bin" / "gatekeeper"
    for code, expected in ((0, 0), (3, 0), (1, 2)):
        stub.write_text(f"#!/bin/sh\nexit {code}\n")
        stub.chmod(0o755)
        res = proc.run(["make", "-s", "-C", str(REPO), "demo", f"VENV={venv}"], timeout=60)
        assert res.returncode == expected, (code, res.describe(), res.stderr)


def _subcommands() -> list[list[str]]:
    """Every gatekeeper command and sub-command, from the parser itself."""
    import argparse

    from gatekeeper.cli import build_parser

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> list[list[str]]:
        out = [prefix]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    out += walk(sub, [*prefix, name])
        return out

    return walk(build_parser(), [])


def _exit_code(main, argv: list[str]) -> int:
    """main's return value, or the code of the SystemExit argparse raises for --help."""
    try:
        return int(main(argv) or 0)
    except SystemExit as done:
        return int(done.code or 0)


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    """README: "Every command has `--help`" (gatekeeper stage --help was a usage error)."""
    from gatekeeper.cli import main

    assert "Every command has `--help`" in README
    commands = _subcommands()
    assert ["stage"] in commands
    assert ["doctor"] in commands
    assert len(commands) > 12
    for argv in commands:
        assert _exit_code(main, [*argv, "--help"]) == 0, argv
        assert "usage:" in capsys.readouterr().out, argv
    from stages import STAGES

    for name in STAGES:
        assert _exit_code(main, ["stage", name, "--help"]) == 0, name
        assert f"gatekeeper stage {name}" in capsys.readouterr().out


@pytest.mark.slow
def test_the_reproduce_line_gives_the_verdict_it_sits_in(tmp_path: Path) -> None:
    """verdict.md's reproduce line for a `pipeline --stages ...` run gave the opposite verdict (issue 28)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CI", "GITLAB", "GATEKEEPER_"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    shutil.copy(REPO / "gates.yaml", tmp_path / "gates.yaml")
    run = proc.run(
        ["gatekeeper", "pipeline", "--device", "cpu", "--out", "out", "--stages", "verify_hip"],
        timeout=600, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert run.returncode in (0, 3), run.stdout[-2000:]
    first = json.loads((tmp_path / "out" / "verdict.json").read_text())
    md = (tmp_path / "out" / "verdict.md").read_text()
    line = re.search(r"<summary>Reproduce</summary>\s*```sh\n(.*?)\n```", md, re.DOTALL).group(1)
    assert "--stages verify_hip" in line, line
    assert "--artifacts out" in line, line
    again = proc.run(["bash", "-c", line], timeout=300, cwd=tmp_path, env=env)
    second = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert again.returncode == run.returncode
    assert second["result"] == first["result"]
    assert [(g["name"], g["outcome"]) for g in second["gates"]] == [(g["name"], g["outcome"]) for g in first["gates"]]


def _benchmark_row(section: str, label: str) -> list[str]:
    text = (REPO / "benchmarks" / "README.md").read_text()
    part = text[text.index(section) :]
    row = next(line for line in part.splitlines() if line.startswith(f"| {label}"))
    return [c.strip() for c in row.strip("|").split("|")]


def test_readme_states_the_recorded_evaluate_and_junitparser_figures() -> None:
    """README quotes benchmarks/README.md's record for evaluate vs junitparser, and claims nothing beyond it."""
    junit = _benchmark_row("## Evaluate over a large JUnit file", "junitparser: import + `JUnitXml.fromfile`")
    evaluate = _benchmark_row("## Evaluate over a large JUnit file", "gatekeeper evaluate, the 200,000-case file")
    para = " ".join(README[README.index("## Benchmarks") : README.index("## Layout")].split())
    # columns: process, wall s median (range), CPU s median (range), peak RSS MB median
    wall, rss = evaluate[1].split()[0], evaluate[3]
    assert f"`gatekeeper evaluate` {wall} s wall and {rss} MB peak RSS" in para, para
    assert f"`junitparser` loading the file alone {junit[1].split()[0]} s and {junit[3]} MB" in para, para
    assert not re.search(r"(faster|slower) than junitparser", para), "state the record, not a comparison"


def test_failure_analysis_speed_figures_are_the_recorded_ones() -> None:
    text = " ".join(DOCS["docs/failure_analysis.md"].split())
    row = _benchmark_row("## Failure analysis", "500 MB text")
    gz = _benchmark_row("## Failure analysis", "500 MB gzip")
    wall, cpu, rss = row[3], row[4], row[5]
    assert f"classified in {wall} wall ({cpu} of CPU" in text, (wall, cpu)
    assert f"peak RSS of {rss}" in text
    assert f"500 MB log takes {gz[3]}" in text
    assert "24 s wall" not in text, "the withdrawn figures"
    assert "37 MB" not in text, "the withdrawn figures"


def test_docs_name_the_metric_each_default_gate_reads() -> None:
    """A "Default gates" paragraph names metrics and rules as the default gates have them (bf16: issue 28)."""
    gates = {g.name: g for g in load_gates(REPO / "gates.yaml").gates}
    by_metric = {g.metric.split(".", 1)[1]: g for g in gates.values()}
    for doc, text in DOCS.items():
        for para in _paragraphs(text):
            if not para.startswith("Default gates"):
                continue
            for metric, rule in re.findall(r"`([a-z_][a-z0-9_.]*) ((?:<=|>=|==) [^`]+)`", para):
                assert metric in by_metric, f"{doc}: {metric} is read by no default gate"
                assert by_metric[metric].pass_rule.text == rule, (doc, metric, rule, by_metric[metric].pass_rule.text)
            for name in re.findall(r"`([a-z0-9-]+)` \(`", para):
                assert name in gates, f"{doc}: {name} is no default gate"


# The exit codes the docs state, each against its command (a phrase of the doc, then the run).
_EXIT_CLAIMS = [
    ("README.md", "A stage exits 0 when its checks passed or were skipped, 1 when a check failed, 2 on bad options",
     ["stage", "verify_hip", "--device", "tpu"], 2),
    ("README.md", "Exit 0 when nothing will fail, 1 when a finding is an error, 2 on bad input",
     ["doctor", "--from", "no-such-capture"], 2),
    ("docs/failure_analysis.md", "Exit codes: `0` a diagnosis was produced (any category, `unknown` included), "
     "`2` bad input (a log that does not exist", ["analyze", "no-such.log", "--no-model"], 2),
    ("docs/failure_analysis.md", "Exit codes: `0` a diagnosis was produced (any category, `unknown` included)",
     ["analyze", "clean.log", "--no-model"], 0),
    ("README.md", "gatekeeper breaker check --channel nightly --job functional_test   # exit 4 while the breaker is open",
     ["breaker", "check", "--channel", "nightly", "--job", "functional_test"], 4),
]  # fmt: skip


@pytest.mark.parametrize(
    ("doc", "phrase", "argv", "code"), _EXIT_CLAIMS, ids=[" ".join(c[2][:2]) for c in _EXIT_CLAIMS]
)
def test_stated_exit_codes(doc, phrase, argv, code, tmp_path, monkeypatch, capsys) -> None:
    from gatekeeper.cli import main

    assert " ".join(phrase.split()) in " ".join(DOCS[doc].split()), f"{doc} no longer says: {phrase}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GATEKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GATEKEEPER_BREAKER_DIR", raising=False)
    (tmp_path / "clean.log").write_text("step 1 loss 0.5\nall good\n")
    if argv[:2] == ["breaker", "check"]:  # open it: three recorded failures
        for _ in range(3):
            record = ["breaker", "record", "--channel", "nightly", "--job", "functional_test", "--exit-code", "1"]
            assert _exit_code(main, record) == 0
    assert _exit_code(main, argv) == code, capsys.readouterr()


# --- What the docs name exists as the code has it (issue: docs that promise what commands don't do) -------------
#
# Each test below reads every doc and holds one kind of name to the code: exit codes, environment variables,
# commands and options, CI inputs and jobs, repository paths, the cache fingerprint. A renamed option, a
# dropped variable or a moved test makes the doc line that still names it fail here.

ALL_DOCS = {**DOCS, "CONTRIBUTING.md": (REPO / "CONTRIBUTING.md").read_text()}


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def test_the_exit_code_table_is_every_exit_code() -> None:
    """README's "Exit codes (every command)" table has a row for every ExitCode and none other; `gatekeeper
    --help` names each of them too."""
    from gatekeeper.cli import build_parser
    from gatekeeper.core.exitcodes import ExitCode

    table = _section(README, "## Exit codes (every command)")
    rows = re.findall(r"^\| (\d+) \|", table, re.MULTILINE)
    assert sorted(int(r) for r in rows) == sorted(int(c) for c in ExitCode), rows
    epilog = " ".join((build_parser().epilog or "").split())
    for code in ExitCode:
        assert re.search(rf"\b{int(code)} [a-z]", epilog), f"gatekeeper --help does not name exit code {int(code)}"


_VAR = re.compile(r"\b(?:GATEKEEPER|SLACK)_[A-Z0-9_]*[A-Z0-9]\b")
# Where a variable the docs name may be read or set: the library, the stages, the scripts, the CI files.
_VAR_READERS = ["gatekeeper", "stages", "scripts", "ci-templates", "docker", ".ci"]
_VAR_READER_FILES = [".gitlab-ci.yml", "Makefile", "tests/conftest.py"]
# GATEKEEPER_ names in the library that are no variable a user sets or reads.
_NOT_A_VARIABLE = {
    "GATEKEEPER_PERF_RESULT": "a line prefix a timing worker prints on its stdout (stages/perf/timing.py)",
}


def _code_text(folders: list[str], files: list[str]) -> str:
    texts = [(REPO / f).read_text() for f in files]
    for folder in folders:
        texts += [
            p.read_text(errors="replace")
            for p in sorted((REPO / folder).rglob("*"))
            if p.is_file() and p.suffix in ("", ".py", ".sh", ".yml", ".yaml", ".toml") and "__pycache__" not in p.parts
        ]
    return "\n".join(texts)


def test_every_gatekeeper_variable_the_docs_name_is_read_or_set_by_the_code() -> None:
    code = set(_VAR.findall(_code_text(_VAR_READERS, _VAR_READER_FILES)))
    for doc, text in ALL_DOCS.items():
        for n, line in enumerate(text.splitlines(), 1):
            for var in _VAR.findall(line):
                assert var in code, f"{doc}:{n}: {var} is read or set nowhere (gatekeeper/, stages/, CI files)"


def test_every_gatekeeper_variable_the_library_reads_or_sets_is_documented() -> None:
    named = set(_VAR.findall("\n".join(ALL_DOCS.values())))
    for path in sorted([*(REPO / "gatekeeper").rglob("*.py"), *(REPO / "stages").rglob("*.py")]):
        for var in set(_VAR.findall(path.read_text())):
            if var not in _NOT_A_VARIABLE:
                assert var in named, f"{path.relative_to(REPO)}: {var} is named in no doc (README.md, docs/)"
    for var in _NOT_A_VARIABLE:
        assert var not in named, f"{var} is documented: take it out of _NOT_A_VARIABLE"


@functools.cache
def _parsers() -> dict[tuple[str, ...], object]:
    """Every gatekeeper (sub)command's parser by its words, and each stage's as ("stage", NAME)."""
    import argparse

    from gatekeeper.cli import build_parser
    from stages import STAGES, load_stage
    from stages._stage import build_parser as stage_parser

    out: dict[tuple[str, ...], object] = {}

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        out[words] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*words, name))

    walk(build_parser(), ())
    for name in STAGES:
        out[("stage", name)] = stage_parser(load_stage(name))
    return out


def _options(parser: object) -> set[str]:
    return {o for action in parser._actions for o in action.option_strings}  # type: ignore[attr-defined]


def _inline_commands() -> list[tuple[str, int, str]]:
    """(doc, line, text) of every `gatekeeper ...` code span in prose (fenced blocks are examples, above)."""
    found = []
    for doc, text in ALL_DOCS.items():
        prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.DOTALL)
        for m in re.finditer(r"`(gatekeeper [^`]+)`", prose):
            found.append((doc, prose.count("\n", 0, m.start()) + 1, " ".join(m.group(1).split())))
    return found


def _command_problems(command: str) -> list[str]:
    """What in a `gatekeeper ...` line the parsers do not have: a command, a stage or an option (placeholders
    such as NAME or <stage> and optional [...] parts aside)."""
    parsers = _parsers()
    words = re.sub(r"\[[^\]]*\]", "", command).split()[1:]
    path: tuple[str, ...] = ()
    while words and not words[0].startswith("-"):
        word = words[0]
        if (*path, word) in parsers:
            path, words = (*path, word), words[1:]
            continue
        if path == ("stage",) and re.fullmatch(r"<\w+>|[A-Z_]+", word):
            path, words = ("stage", "verify_hip"), words[1:]  # `gatekeeper stage <stage> ...`: the common options
            continue
        if re.fullmatch(r"[A-Z_.]+|\.\.\.|…|<[^>]+>|COMMAND", word) or not any(p[: len(path)] == path for p in parsers):
            break
        if any(len(p) == len(path) + 1 and p[: len(path)] == path for p in parsers):
            return [f"no command `gatekeeper {' '.join((*path, word))}`"]
        break
    options = _options(parsers[path]) | {"--help"}
    problems = []
    for word in words:
        if word == "--":
            break  # what follows is another command's
        option = word.split("=", 1)[0]
        if re.fullmatch(r"--[a-z][a-z0-9-]*", option) and option not in options:
            problems.append(f"`gatekeeper {' '.join(path)}` has no option {option}")
    return problems


def test_every_gatekeeper_command_in_the_prose_names_real_commands_and_options() -> None:
    spans = _inline_commands()
    assert len(spans) > 80, len(spans)
    problems = [f"{doc}:{n}: `{cmd}`: {p}" for doc, n, cmd in spans for p in _command_problems(cmd)]
    assert not problems, "\n".join(problems)


def test_every_gatekeeper_example_names_its_options_in_full() -> None:
    """argparse takes an unambiguous prefix (`--golden-sav` for `--golden-save`): the runs above accept it, a
    later option with the same prefix would not. Every `gatekeeper ...` example names real options in full."""
    problems = []
    for example in EXAMPLES:
        for command in re.split(r"\s*(?:&&|\|\||;|\|)\s*|\n", example.command):
            argv = re.sub(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+", "", command.strip())
            if argv.startswith("gatekeeper "):
                problems += [f"{example.id}: {p}" for p in _command_problems(argv.split("#", 1)[0])]
    assert not problems, "\n".join(problems)


def test_the_command_check_catches_a_wrong_command_or_option() -> None:
    assert _command_problems("gatekeeper breaker check --channel nightly --job x") == []
    assert _command_problems("gatekeeper stage <stage> --device auto --out artifacts/<channel>") == []
    assert _command_problems("gatekeeper stage performance_baseline --duration 24h") == []
    assert _command_problems("gatekeeper bisect --stage x -- --processes 5") == []
    assert _command_problems("gatekeeper breaker check --chanel nightly")
    assert _command_problems("gatekeeper breaker chek --channel nightly")
    assert _command_problems("gatekeeper stage functional_test --seeds 2 --no-such-option")
    assert _command_problems("gatekeeper stage functional_test --golden-sav x")  # a prefix argparse would take


def test_every_gatekeeper_command_in_a_yaml_example_parses() -> None:
    """A `gatekeeper ...` line of a job's `script:` in a docs yaml block (the cuda-golden job of docs/ci.md)."""
    found = 0
    for doc, text in ALL_DOCS.items():
        for lang, start, body in _fenced_blocks(text):
            if lang != "yaml":
                continue
            for job in (yaml.safe_load("\n".join(body)) or {}).values():
                for line in job.get("script", []) if isinstance(job, dict) else []:
                    if str(line).startswith("gatekeeper "):
                        found += 1
                        assert not _command_problems(str(line)), (doc, start, line, _command_problems(str(line)))
                        try:
                            _parse_only(str(line))
                        except SystemExit as err:
                            pytest.fail(f"{doc}:{start}: `{line}` is refused by its parser (exit {err.code})")
    assert found >= 1


# Options the docs quote of other tools (rocm-smi, pip, gitlab-ci-local, ruff, pytest, git, postgres) and of the
# repository's own scripts; every other `--option` in the docs is an option of a gatekeeper command or a stage.
_OTHER_TOOLS_OPTIONS = {
    "--check", "--durations", "--dist", "--showproductname", "--showbus", "--showtemp", "--showpower", "--showmemuse",
    "--showmeminfo", "--showuse", "--csv", "--query-gpu", "--verify", "--db-passwd", "--output",
    "--exclude-editable", "--without-pip", "--python", "--isolated", "--rm", "--no-deps", "--pwprompt", "--owner",
    "--pre", "--dest", "--no-index", "--tag", "--strict", "--print-path", "--list-json", "--variable",
    "--force-shell-executor", "--shell-isolation", "--preview", "--planted-only", "--split", "--errors",
}  # fmt: skip


def test_every_option_the_docs_name_exists() -> None:
    known = set().union(*(_options(p) for p in _parsers().values()))
    assert not (_OTHER_TOOLS_OPTIONS & known), "a gatekeeper option is listed as another tool's"
    for doc, text in ALL_DOCS.items():
        for n, line in enumerate(text.splitlines(), 1):
            for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", line):
                assert option in known | _OTHER_TOOLS_OPTIONS, f"{doc}:{n}: {option} is no option of any command"


# Paths in the docs that are no file of this repository, each with why.
_NOT_OUR_PATHS = {
    "tests/gpu_cases.py": "a model repository's own case file (docs/functional_test.md)",
    "tests/gatekeeper_cases.py": "a model repository's own case file (docs/ci.md)",
    "docker/podman": "the engines, not a path",
    "gatekeeper/gates": "the commit status's name",
}
_PATH = re.compile(
    r"(?<![\w./:$@-])((?:tests|scripts|benchmarks|gatekeeper|stages|docker|ci-templates|templates|docs)/[\w./*-]*[\w*])"
)


def test_every_repository_path_the_docs_name_exists() -> None:
    for doc, text in ALL_DOCS.items():
        for n, line in enumerate(text.splitlines(), 1):
            for path in _PATH.findall(line):
                if path in _NOT_OUR_PATHS:
                    continue
                hits = list(REPO.glob(path)) if "*" in path else [REPO / path] if (REPO / path).exists() else []
                assert hits, f"{doc}:{n}: {path} is not in this repository"


def test_the_docs_cite_no_path_outside_the_repository() -> None:
    """Docs cite only files in this repository (compatibility_check.md cited "/work/shared docs/measured.md")."""
    for doc, text in ALL_DOCS.items():
        for n, line in enumerate(text.splitlines(), 1):
            assert not re.search(r"(?<![\w.])(/work/|\.\./shared\b|/home/)", line), f"{doc}:{n}: {line.strip()[:120]}"


def test_every_test_the_docs_name_exists() -> None:
    tests_text = "\n".join(p.read_text() for p in (REPO / "tests").rglob("*.py"))
    stems = {p.stem for p in (REPO / "tests").rglob("test_*.py")}
    quoted_log_lines = {"test_conv2d_float16", "test_x"}  # a test name inside a log line or a sample, not ours
    for doc, text in ALL_DOCS.items():
        for n, line in enumerate(text.splitlines(), 1):
            for name in re.findall(r"\btest_[a-z0-9_]+\b", line):
                if name in stems or name in quoted_log_lines:
                    continue
                assert re.search(rf"def {name}\b", tests_text), f"{doc}:{n}: no test {name}"


def test_the_ci_inputs_table_states_each_inputs_type_and_default() -> None:
    spec, _ = split_component(REPO / "ci-templates" / "gatekeeper.yml")
    rows = re.findall(
        r"^\| `([a-z_]+)` \| (\w+) \| ([^|]*) \|", _section(DOCS["docs/ci.md"], "## Inputs"), re.MULTILINE
    )
    assert {r[0] for r in rows} == set(spec)
    for name, kind, default in rows:
        assert kind == spec[name].get("type", "string"), (name, kind)
        if name == "version":  # stamped at release: the doc names it by example
            assert f"`{spec[name]['default']}`" in default, (name, default)
            continue
        shown = re.match(r"`([^`]*)`", default)
        assert shown, (name, default)
        value = shown.group(1) if spec[name].get("type", "string") == "string" else yaml.safe_load(shown.group(1))
        if spec[name].get("type", "string") == "string" and value == '""':
            value = ""
        assert value == spec[name]["default"], (name, shown.group(1), spec[name]["default"])


def _job_bullets() -> list[tuple[str, str]]:
    """(job, bullet) of each bullet of docs/ci.md's "What each job does" that names one job."""
    section = _section(DOCS["docs/ci.md"], "## What each job does")
    out = []
    for bullet in re.split(r"\n- ", section)[1:]:
        head = bullet.split(":", 1)[0] if "`gatekeeper:" not in bullet.split("\n", 1)[0] else bullet.split("\n", 1)[0]
        jobs = re.findall(r"`(gatekeeper:[a-z_-]+)", head)
        if len(jobs) == 1:
            out.append((jobs[0], bullet))
    return out


def test_each_job_is_described_once_with_the_templates_when() -> None:
    """docs/ci.md described gatekeeper:diagnose twice, once as `when: on_failure` (the template's is `always`)."""
    from tests.test_ci_templates import _load_all

    (body,) = _load_all(split_component(REPO / "ci-templates" / "gatekeeper.yml")[1])
    bullets = _job_bullets()
    jobs = [job for job, _ in bullets]
    assert len(jobs) >= 5, jobs
    assert len(jobs) == len(set(jobs)), f"a job is described twice: {jobs}"
    for job, bullet in bullets:
        head = bullet[: bullet.index("):") + 2] if "):" in bullet else bullet.split("\n", 1)[0]
        rules = body[job].get("rules", [])
        whens = {r.get("when", "on_success") for r in rules} | ({body[job]["when"]} if "when" in body[job] else set())
        for when in re.findall(r"`when: (\w+)`", head):
            assert when in whens, f"docs/ci.md says {job} runs `when: {when}`; the template's rules: {whens}"


def test_the_no_baseline_row_names_the_gates_that_warn() -> None:
    gates = load_gates(REPO / "gates.yaml").gates
    compared = [g for g in gates if g.compare]
    warn = sorted(g.name for g in compared if g.on_missing == "warn")
    row = next(line for line in DOCS["docs/ci.md"].splitlines() if line.startswith("| none |"))
    named = sorted(re.findall(r"`([a-z0-9-]+)`", row))
    assert named == warn, (named, warn)
    others = {g.on_missing for g in compared if g.on_missing != "warn"}
    assert others == {"skip"}, others
    assert "skipped" in row, row


def test_the_cache_key_doc_lists_the_fingerprints_fields() -> None:
    from gatekeeper.kernel_cache.key import cache_fingerprint

    fields = set(cache_fingerprint({}))
    line = next(line for line in DOCS["docs/ci.md"].splitlines() if "gatekeeper cache key --json" in line)
    listed = {f.strip() for f in line.split("the fingerprint:", 1)[1].split(",")}
    assert listed == fields, (listed, fields)


def test_a_bisected_command_sees_the_variables_docs_release_names(tmp_path, monkeypatch, capsys) -> None:
    """docs/release.md: the command sees GATEKEEPER_BISECT_CANDIDATE (the commit) and GATEKEEPER_BISECT_OUT."""
    from gatekeeper import cli
    from tests.bisect.builders import make_repo

    flat = " ".join(DOCS["docs/release.md"].split())
    assert "the command sees the candidate in `GATEKEEPER_BISECT_CANDIDATE`" in flat
    assert "the directory of its round in `GATEKEEPER_BISECT_OUT`" in flat
    check = (
        "import os, pathlib, sys\n"
        "out = pathlib.Path(os.environ['GATEKEEPER_BISECT_OUT'])\n"
        "(out / 'seen.txt').write_text(os.environ['GATEKEEPER_BISECT_CANDIDATE'])\n"
        "sys.exit(1 if int(open('n.txt').read()) >= 3 else 0)\n"
    )
    repo = make_repo(tmp_path / "r", 4, lambda i: {"n.txt": str(i), "check.py": check})
    monkeypatch.chdir(tmp_path / "r")
    out = tmp_path / "bisect"
    argv = ["bisect", "--provider", "git", "--good", "first", "--bad", "main", "--out", str(out), "--no-bundle"]
    assert cli.main([*argv, "--", sys.executable, "check.py"]) == 0, capsys.readouterr()
    seen = {p.read_text() for p in out.rglob("seen.txt")}
    assert seen, "the command found no GATEKEEPER_BISECT_OUT to write to"
    assert seen <= {c.hexsha for c in repo.iter_commits()}, seen


def test_the_store_table_and_the_baseline_help_name_every_store() -> None:
    """README's store table names every store kind; docs/release.md sends readers to `gatekeeper evaluate --help`
    for them, whose --baseline help named neither file:DIR nor postgresql://."""
    from gatekeeper.history import STORES

    table = _section(README, "### Baseline and history stores")
    specs = [s for row in re.findall(r"^\| ([^|]+) \|", table, re.MULTILINE) for s in re.findall(r"`([^`]+)`", row)]
    for prefix in STORES:
        if prefix == "postgres":  # the alias of postgresql
            continue
        assert any(s.startswith(f"{prefix}:") for s in specs), f"README's store table lacks {prefix}:"
    assert "the others listed in `gatekeeper evaluate --help`" in " ".join(DOCS["docs/release.md"].split())
    parsers = _parsers()
    for words in (("evaluate",), ("pipeline",)):
        (action,) = [a for a in parsers[words]._actions if "--baseline" in a.option_strings]  # type: ignore[attr-defined]
        for spec in ("DIR", "file:DIR", "sqlite:PATH", "postgresql://", "gitlab:", "git:BRANCH"):
            assert spec in action.help, (words, spec, action.help)


def test_the_docs_list_every_failure_category() -> None:
    """README's list of categories and docs/failure_analysis.md's taxonomy table are the contract's categories."""
    from gatekeeper.contract.failures import CATEGORIES

    para = " ".join(README[README.index("### `gatekeeper analyze`") :].split("```", 1)[0].split())
    listed = re.search(r"into (`no_binary_for_gpu`.*?`unknown`)", para)
    assert listed, "README no longer lists the categories after 'into'"
    assert re.findall(r"`([a-z_]+)`", listed.group(1)) == list(CATEGORIES)
    table = _section(DOCS["docs/failure_analysis.md"], "## The taxonomy")
    rows = re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE)
    assert rows == list(CATEGORIES), rows


def test_the_analyze_byte_bounds_are_the_codes() -> None:
    """The bounds README and docs/failure_analysis.md state for streaming logs (MiB, not MB)."""
    from gatekeeper.analyze import classify

    flat_readme = " ".join(README.split())
    flat_fa = " ".join(DOCS["docs/failure_analysis.md"].split())
    chunk, line = classify.CHUNK_BYTES >> 20, 4 * classify.CHUNK_BYTES >> 20  # a line is cut at four chunks
    assert f"one {chunk} MiB chunk at a time, a line without a newline cut every {line} MiB" in flat_readme
    assert f"in {chunk} MiB chunks" in flat_fa
    assert f"a line without a newline is cut every {line} MiB" in flat_fa
    assert f"the tails of all logs together to {classify.MAX_KEPT_BYTES >> 20} MiB" in flat_fa
    assert f"at most {classify.MAX_INPUT_BYTES >> 30} GiB of log text" in flat_fa
    assert f"at most {classify.MAX_MATCHED_CHARS >> 20} MiB of candidate lines" in flat_fa


# The stage docs' option tables: "| option | default | ... |", each row's default(s) against the stage's parser.
_OPTION_TABLES = {
    "docs/performance.md": "performance_baseline",
    "docs/functional_test.md": "functional_test",
    "docs/compatibility_check.md": "compatibility_check",
}


def _same_default(shown: str, default: object) -> bool:
    shown = shown.strip().strip("`")
    words = shown.split(" ", 1)[0]
    if default is None or default == "":
        return shown in ("none", "—", "off")
    if default is False:
        return shown == "off"
    if isinstance(default, int | float) and not isinstance(default, bool):
        try:
            return float(words) == float(default)
        except ValueError:
            return False
    return shown == str(default)


def _option_table_rows(doc: str) -> list[tuple[int, list[str], list[str]]]:
    rows = []
    lines = DOCS[doc].splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^\| option \| default \|", line))
    for n, line in enumerate(lines[start + 2 :], start + 3):
        if not line.startswith("| `--"):
            break
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        options = re.findall(r"`(--[a-z0-9-]+)[^`]*`", cells[0])
        defaults = re.split(r",\s+", cells[1]) if len(options) > 1 else [cells[1]]
        rows.append((n, options, defaults))
    return rows


@pytest.mark.parametrize("doc", list(_OPTION_TABLES))
def test_a_stage_docs_option_table_states_the_parsers_defaults(doc: str) -> None:
    from stages import load_stage
    from stages._stage import build_parser as stage_parser

    parser = stage_parser(load_stage(_OPTION_TABLES[doc]))
    defaults = {o: a.default for a in parser._actions for o in a.option_strings}
    rows = _option_table_rows(doc)
    assert len(rows) >= 10, rows
    for n, options, shown in rows:
        assert len(options) == len(shown), f"{doc}:{n}: {len(options)} options, {len(shown)} defaults"
        for option, value in zip(options, shown, strict=True):
            assert option in defaults, f"{doc}:{n}: {option} is no option of the stage"
            assert _same_default(value, defaults[option]), (
                f"{doc}:{n}: {option} default {value!r}, the stage's {defaults[option]!r}"
            )


def test_the_capture_format_table_is_the_snapshots_files_and_commands() -> None:
    """docs/doctor.md's "Capture format": every file doctor reads, and the command each tool file comes from."""
    from gatekeeper.machine import snapshot

    table = _section(DOCS["docs/doctor.md"], "### Capture format").split("\n\n")[1]
    rows = {r[0]: r[1] for r in re.findall(r"^\| `([^`]+)` \| (.*) \|$", table, re.MULTILINE)}
    assert list(rows) == list(snapshot.FILES)
    for argv, file in snapshot.TOOLS.values():
        command = " ".join(a for a in argv if a != "{python}")
        if command.startswith("-m "):
            command = "python " + command
        assert command in rows[file], f"docs/doctor.md: {file}: does not name `{command}`"


def test_the_gate_key_table_is_the_schemas(tmp_path: Path) -> None:
    """README's "Every key of a gate": each key the schema's, each enum value and default named in its row, the
    `when:` conditions and the `channels:` overrides as the schema has them."""
    from gatekeeper.contract.schemas import load_schema

    schema = load_schema("gatekeeper.gates/v1")
    gate = schema["$defs"]["gate"]["properties"]
    table = _section(README, "### Syntax")
    rows = {}
    for line in table.splitlines():
        m = re.match(r"^\| (`[^|]+) \| (.*) \|$", line)
        if m:
            for key in re.findall(r"`([a-z_]+):?`", m.group(1)):
                rows[key] = m.group(2)
    assert set(rows) - {"channels"} == set(gate), set(rows) ^ set(gate)
    for key, spec in gate.items():
        for value in spec.get("enum", []):
            assert f"`{value}`" in rows[key], f"README's `{key}` row does not name `{value}`"
        if "default" in spec:
            assert f"`{spec['default']}` (default)" in rows[key], f"README's `{key}` row: default {spec['default']}"
    when = schema["$defs"]["when"]["properties"]
    assert set(re.findall(r"`([a-z_]+)(?:`|: )", rows["when"])) == set(when), rows["when"]
    overrides = schema["$defs"]["override"]["properties"]
    listed = re.search(r"per-channel overrides of a gate's (.*?) \(", rows["channels"])
    assert listed
    assert set(re.findall(r"`([a-z_]+)`", listed.group(1))) == set(overrides), listed.group(1)
    # the defaults of a gate that sets none, as evaluate applies them
    (tmp_path / "gates.yaml").write_text("version: 1\ngates:\n  g:\n    metric: s.m\n    pass: '>= 1'\n")
    (loaded,) = load_gates(tmp_path / "gates.yaml").gates
    assert f"significance level (default {loaded.alpha})" in rows["alpha"]
    assert f"(default {loaded.max_cv}, at most {gate['max_cv']['maximum']})" in rows["max_cv"]


# "Options:" sentences, each with the command whose options it lists (a phrase that starts it, the command's words).
_OPTION_LISTS = [
    ("README.md", "Common options: `--device auto|cpu|cuda`", ("stage", "verify_hip")),
    ("README.md", "Options: `--out`, `--gates`, `--device`, `--channel`", ("pipeline",)),
    ("README.md", "Options: `--out`, `--gates`, `--device`, `--sizes", ("gpu-check",)),
    ("docs/ci.md", "`check` options: `--policy-only`", ("breaker", "check")),
    ("docs/ci.md", "`record` takes `--result pass|fail`", ("breaker", "record")),
    ("docs/doctor.md", "Options: the common stage options, plus `--smoke-timeout", ("stage", "verify_hip")),
    ("docs/release.md", "Other inputs: `--downstream onnxruntime,tensorrt`", ("advise",)),
]


@pytest.mark.parametrize(("doc", "phrase", "words"), _OPTION_LISTS, ids=[f"{d}:{w}" for d, _, w in _OPTION_LISTS])
def test_an_options_sentence_names_the_commands_own_options(doc: str, phrase: str, words: tuple[str, ...]) -> None:
    text = DOCS[doc]
    assert phrase in text, f"{doc} no longer says: {phrase}"
    sentence = re.split(r"\.\s", text[text.index(phrase) :].split("\n\n", 1)[0], maxsplit=1)[0]
    options = _options(_parsers()[words])
    named = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", sentence)
    assert named, sentence
    for option in named:
        assert option in options, f"{doc}: `gatekeeper {' '.join(words)}` has no {option}: {sentence[:200]}"


def test_the_catalog_counts_the_docs_quote_are_the_catalogs() -> None:
    """docs/functional_test.md's per-category counts and their total (README quotes the total)."""
    from stages.functional.catalog import cases_in
    from stages.functional.distributed import case_names

    flat = " ".join(DOCS["docs/functional_test.md"].split())
    m = re.search(r"(\d+) cases in the field report's six categories — (.*?) — ", flat)
    assert m, "docs/functional_test.md no longer quotes the catalog's counts"
    quoted = {k: int(v) for k, v in re.findall(r"([a-z_]+) (\d+)", m.group(2))}
    counts = {c: len(cases_in((c,))) for c in quoted if c != "distributed"} | {"distributed": len(case_names())}
    assert quoted == counts
    assert int(m.group(1)) == sum(counts.values())
    assert f"an operator catalog of {m.group(1)} cases in six categories" in README


def test_what_each_job_does_names_commands_the_job_runs() -> None:
    """Every `gatekeeper ...` a "What each job does" bullet of docs/ci.md names is run by that job of the rendered
    template, with the options the doc gives it."""
    from tests.test_ci_templates import ROOT, _include, render

    jobs = render(_include(), ROOT)
    section = _section(DOCS["docs/ci.md"], "## What each job does")
    bullets = [("gatekeeper:verify_hip", b) for b in re.split(r"\n- ", section) if b.startswith("**Stage jobs**")]
    bullets += _job_bullets()
    assert len(bullets) >= 6, [j for j, _ in bullets]
    parsers = _parsers()
    checked = 0
    for job, bullet in bullets:
        spec = jobs[job]
        script = "\n".join(str(s) for key in ("before_script", "script") for s in spec.get(key, []))
        for span in re.findall(r"`(gatekeeper [^`]+)`", bullet):
            words = span.split()[1:]
            command = ["gatekeeper", words[0]]
            if len(words) > 1 and (words[0], words[1]) in parsers:
                command.append(words[1])
            head = " ".join(command)
            lines = [line for line in script.splitlines() if head in line]
            assert lines, f"docs/ci.md says {job} runs `{span}`; its script has no `{head}`"
            for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span):
                # on the command's line, or in the `set --` arguments the script builds for it
                assert re.search(rf"{option}\b", script), f"docs/ci.md: {job}: `{span}`: {option} is not passed"
            checked += 1
    assert checked >= 15, checked


def test_the_gpu_check_sizes_table_is_what_gpu_check_passes() -> None:
    from gatekeeper.run import gpu_check

    table = _section(DOCS["docs/performance.md"], "## The GPU check")
    rows = {r[0]: (r[1], r[2]) for r in re.findall(r"^\| ([a-z_]+) \| (.*) \| (.*) \|$", table, re.MULTILINE)}
    rows.pop("stage")  # the header
    assert set(rows) == set(gpu_check.GPU_ARGS), rows
    for column, args, train in (
        (0, gpu_check.GPU_ARGS, gpu_check.GPU_TRAIN),
        (1, gpu_check.CPU_ARGS, gpu_check.CPU_TRAIN),
    ):
        for stage, argv in args.items():
            shown = rows[stage][column]
            if not argv:
                assert shown.startswith("defaults"), (stage, shown)
                continue
            expected = " ".join([*argv, *(train if stage == "functional_test" else ())])
            assert shown.strip("`").startswith(expected), (stage, column, shown, expected)


def test_every_make_target_and_variable_the_docs_name_exists() -> None:
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.MULTILINE))
    variables = set(re.findall(r"^([A-Z_]+) \?=", makefile, re.MULTILINE)) | {"VENV"}
    named = 0
    for doc, text in ALL_DOCS.items():
        for n, line in enumerate(text.splitlines(), 1):
            for target, rest in re.findall(r"`make ([a-z][a-z-]*)((?: [A-Z_]+=[^` ]*)*)", line):
                named += 1
                assert target in targets, f"{doc}:{n}: no make target {target}"
                for variable in re.findall(r"([A-Z_]+)=", rest):
                    assert variable in variables, f"{doc}:{n}: make {target}: no variable {variable}"
    assert named >= 10, named
    flat = " ".join(README.split())
    fuzz = {
        v: re.search(rf"^{v} \?= (\S+)", makefile, re.MULTILINE).group(1)
        for v in ("EXAMPLES", "SPARSE_MIB", "LINE_MIB", "DEPTH")
    }  # type: ignore[union-attr]
    assert f"draws `EXAMPLES` payloads (default {fuzz['EXAMPLES']})" in flat
    assert f"a {int(fuzz['SPARSE_MIB']) // 1024} GiB sparse file, {fuzz['LINE_MIB']} MiB without a newline" in flat
    assert f"{int(fuzz['DEPTH']):,}-deep brackets" in flat


def test_the_exit_codes_the_jobs_may_fail_with_are_the_templates() -> None:
    """docs/ci.md and README state which exit codes each job may fail with; the rendered template's."""
    from tests.test_ci_templates import ROOT, _include, render

    jobs = render(_include(), ROOT)
    flat = " ".join(DOCS["docs/ci.md"].split())
    gate = jobs["gatekeeper:gate"]["allow_failure"]["exit_codes"]
    stage = {tuple(jobs[f"gatekeeper:{s}"]["allow_failure"]["exit_codes"]) for s in SANDBOX_STAGES.split(",")}
    stage |= {tuple(jobs[f"gatekeeper:{s}"]["allow_failure"]["exit_codes"]) for s in ("performance_baseline",)}
    (stage_codes,) = stage
    assert f"the gate has `allow_failure: exit_codes: {list(gate)}`".replace("'", "") in flat
    assert f"stage jobs have `allow_failure: exit_codes: {list(stage_codes)}`" in flat
    assert jobs["gatekeeper:diagnose"]["allow_failure"] is True
    assert "exit 3 (warnings) may fail" in flat
    assert jobs["gatekeeper:gpu_check"]["allow_failure"] == {"exit_codes": [3]}
    table = _section(README, "## Exit codes (every command)")
    for code in set(gate) | set(stage_codes):
        row = re.search(rf"^\| {code} \|.*$", table, re.MULTILINE)
        assert row, code
        assert "`allow_failure: exit_codes: [" in row.group(0), row.group(0)


def test_the_readme_gate_table_is_the_default_gates() -> None:
    """Each row of README's gate table: the metric, the pass and warn rules, what it compares with, "advisory",
    and the nightly channel's advisory gates, as gates.yaml has them."""
    loaded = load_gates(REPO / "gates.yaml")
    gates = {g.name: g for g in loaded.gates}
    section = README[README.index("## The gates") : README.index("### Syntax")]
    rows = re.findall(r"^\| (`[a-z0-9-]+`(?:, `[a-z0-9-]+`)*) \| (.*?) \| (.*?) \| (.*?) ?\|$", section, re.MULTILINE)
    seen = set()
    for names, metric, rule, notes in rows:
        for i, name in enumerate(re.findall(r"`([a-z0-9-]+)`", names)):
            gate = gates[name]
            seen.add(name)
            metrics = re.findall(r"`([^`]+)`", metric)
            shown = metrics[0] if i == 0 else metrics[0].replace("dir=h2d", "dir=d2h")  # "(and `dir=d2h`)"
            assert shown == gate.metric, (name, shown, gate.metric)
            assert rule.startswith(f"`{gate.pass_rule.text}`"), (name, rule)
            warn = re.search(r"warn `([^`]+)`", rule)
            assert (warn.group(1) if warn else None) == (gate.warn_rule.text if gate.warn_rule else None), (name, rule)
            compare = {"vs baseline": "baseline", "vs the anchor": "anchor", "change point": "history"}
            said = [c for phrase, c in compare.items() if phrase in rule]
            assert said == ([gate.compare] if gate.compare else []), (name, rule, gate.compare)
            advisory = "advisory" in (rule + notes).replace("advisory on nightly", "")
            assert advisory == (gate.severity == "advisory"), (name, notes, gate.severity)
    assert seen == set(gates), set(gates) ^ seen
    nightly = sorted(n for n, o in loaded.channels.get("nightly", {}).items() if o.get("severity") == "advisory")
    para = " ".join(section[section.index("On the nightly channel") :].split("\n\n", 1)[0].split())
    assert sorted(re.findall(r"`([a-z0-9-]+)`", para.split(" are advisory")[0])) == nightly, para
    for names, _, _, notes in rows:
        if "advisory on nightly" in notes:
            assert set(re.findall(r"`([a-z0-9-]+)`", names)) <= set(nightly), (names, nightly)


def test_the_pre_commit_hooks_run_what_make_lint_runs() -> None:
    """README: "Contributors get the same checks before each commit with pre-commit" (bandit was missing)."""
    assert "Contributors get the same checks before each commit" in " ".join(README.split())
    makefile = (REPO / "Makefile").read_text()
    lint = makefile[makefile.index("\nlint:") :].split("\n\n", 1)[0]
    commands = [
        line.strip().replace("$(BIN)/", "")
        for line in lint.strip().splitlines()[1:]
        if not line.strip().startswith("@#")
    ]
    hooks = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"]
    entries = " && ".join(h["entry"].replace(".venv/bin/", "") for h in hooks)
    assert len(commands) >= 5, commands
    for command in commands:
        tool = " ".join(command.split()[:2] if command.startswith("ruff") else command.split()[:1])
        assert tool in entries, f"make lint runs `{command}`; no pre-commit hook does"
        # ruff gets the staged files instead of "." (pass_filenames)
        assert command.removesuffix(" .") in entries.replace(" --force-exclude", ""), f"pre-commit: {command}"


def test_the_output_file_names_the_docs_give_are_the_codes() -> None:
    """evaluate's four outputs (README's list and the files `make demo` leaves), the history spool and the
    gpu-check summary, as the code names them."""
    from gatekeeper.contract.soak_series import SERIES_FILE
    from gatekeeper.evaluate.outputs import OUTPUTS
    from gatekeeper.evaluate.run import SPOOL_FILE
    from gatekeeper.run.gpu_check import SUMMARY_FILE

    section = README[README.index("### `gatekeeper evaluate`") : README.index("It never imports torch")]
    assert re.findall(r"^- `([^`]+)`", section, re.MULTILINE) == list(OUTPUTS)
    flat = " ".join(README.split())
    assert f"leaves `artifacts/{OUTPUTS[0]}`, `{OUTPUTS[1]}`, `{OUTPUTS[2]}`, `{OUTPUTS[3]}`" in flat
    assert f"waits in `{SPOOL_FILE}` beside the verdict" in flat
    assert f"`artifacts/<channel>/{SPOOL_FILE}`" in DOCS["docs/ci.md"]
    assert f"(also `<out>/{SUMMARY_FILE}`)" in flat
    assert f"writes to `<out>/{SUMMARY_FILE}`" in " ".join(DOCS["docs/performance.md"].split())
    assert f"`{SERIES_FILE}`" in DOCS["docs/performance.md"]


def test_every_choice_list_the_docs_give_is_an_options_choices() -> None:
    """`--format table|json|md`, `--device auto|cpu|cuda`, ...: the values are exactly the choices of a command
    that has the option (a value added to the doc that the parser refuses, or one the parser gained, fails)."""
    choices: dict[str, list[set[str]]] = {}
    for parser in _parsers().values():
        for action in parser._actions:  # type: ignore[attr-defined]
            if action.choices and not isinstance(action.choices, dict):
                for option in action.option_strings:
                    choices.setdefault(option, []).append({str(c) for c in action.choices})
    found = 0
    for doc, text in ALL_DOCS.items():
        for n, line in enumerate(text.splitlines(), 1):
            for option, values in re.findall(r"`(--[a-z-]+)[ =]([a-z0-9_.-]+(?:\\?\|[a-z0-9_.-]+)+)`", line):
                found += 1
                listed = set(values.replace("\\|", "|").split("|"))
                assert listed in choices.get(option, []), (
                    f"{doc}:{n}: {option} {sorted(listed)}; the parsers': {choices.get(option)}"
                )
    assert found >= 8, found


def test_every_ci_input_the_docs_name_is_an_input() -> None:
    """README named "the CI template's `gates_file` input"; the input is `gates`. Every input named in prose
    ("the `x` input", "input `x`", "the input `x: ...`") and every key of an `inputs:` in a docs yaml block."""
    spec, _ = split_component(REPO / "ci-templates" / "gatekeeper.yml")
    found = 0
    for doc, text in ALL_DOCS.items():
        flat_lines = text.splitlines()
        for n, line in enumerate(flat_lines, 1):
            both = line + " " + (flat_lines[n] if n < len(flat_lines) else "")  # a name wrapped to the next line
            names = re.findall(r"`([a-z_]+):?(?: [^`]*)?` inputs?\b", line)
            names += re.findall(
                r"\binputs? `([a-z_]+):?(?: [^`]*)?`", both if line.rstrip().endswith("input") else line
            )
            for name in names:
                found += 1
                assert name in spec, f"{doc}:{n}: the CI template has no input {name!r}"
        for lang, start, body in _fenced_blocks(text):
            if lang != "yaml":
                continue
            doc_yaml = yaml.safe_load("\n".join(body)) or {}
            for include in doc_yaml.get("include", []) if isinstance(doc_yaml, dict) else []:
                for name in (include.get("inputs") or {}) if isinstance(include, dict) else {}:
                    found += 1
                    assert name in spec, f"{doc}:{start}: the CI template has no input {name!r}"
    assert found >= 15, found
