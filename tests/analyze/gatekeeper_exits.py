"""Every way a gatekeeper command ends non-zero, produced for real, wrapped as gitlab-runner prints a job.

Each ``Exit`` sets up the inputs of one failure in a scratch directory (a malformed gates.yaml, an
artifact with a duplicate key, a store that does not answer, a breaker opened by recorded failures, ...),
runs the real ``gatekeeper`` console script there and keeps what it printed. ``job_log`` wraps the
output the way gitlab-runner shows a failed job (section markers, the ``$ command`` line,
``ERROR: Job failed: exit code N``), so ``gatekeeper analyze`` reads it as the diagnose job would.

``tests/analyze/test_gatekeeper_exits.py`` runs every exit now (so a changed message that a rule stops
matching fails there) and diagnoses the logs kept in ``tests/analyze/gatekeeper_logs/``;
``python -m tests.analyze.gatekeeper_exits DIR`` writes those logs again, with their provenance in
``DIR/index.jsonl``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GATES = REPO / "gates.yaml"


@dataclass(frozen=True)
class Exit:
    name: str
    argv: tuple[str, ...]  # gatekeeper's arguments (after ``gatekeeper``)
    code: int  # the exit code it must end with
    category: str  # what analyze must name
    known_issue: str  # the signature that must decide
    setup: Callable[[Path], None] | None = None
    env: tuple[tuple[str, str], ...] = ()
    # commands of the same job before this one (their output is in the log; the job's exit code is the first
    # non-zero one, as in a job whose script runs them with `|| true` after a failure)
    before: tuple[tuple[str, ...], ...] = ()
    postgres: bool = False  # "{postgres}" in argv: a real PostgreSQL server's host:port (tests/support/postgres.py)
    timeout: float = 300.0  # seconds for each command
    # a local fake GitLab API for the commands ("{gitlab}" in env: its URL), its project set up by this function
    # (tests/machine/test_gitlab_settings.py FakeGitLab); the URL reads as https://gitlab.example.com in the output
    gitlab: Callable[[Any], None] | None = None


def gatekeeper_command() -> list[str]:
    script = Path(sys.executable).parent / "gatekeeper"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "gatekeeper"]


def _env(extra: tuple[tuple[str, str], ...]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEKEEPER_", "CI_", "GITLAB_"))}
    # (a CI job running these tests has its own CI_ variables: each exit sets the ones it needs)
    env["PYTHONPATH"] = str(REPO)  # the checkout under test, whatever the venv's editable install points at
    env["GATEKEEPER_BREAKER_DIR"] = "breaker"
    extra_env = dict(extra)
    if "PYTHONPATH" in extra_env:  # ahead of the checkout, never instead of it
        extra_env["PYTHONPATH"] += os.pathsep + env["PYTHONPATH"]
    return {**env, **extra_env}


@dataclass(frozen=True)
class Step:
    argv: tuple[str, ...]
    code: int
    output: str

    @property
    def command(self) -> str:
        return shlex.join(["gatekeeper", *self.argv])


def run(exit_: Exit, work: Path, timeout: float | None = None, *, postgres: str = "") -> list[Step]:
    """Set up ``exit_`` in ``work`` and run its commands: each with its exit code and its output (stdout and
    stderr as one stream, as a job log shows them); ``exit_.argv`` is the last."""
    work.mkdir(parents=True, exist_ok=True)
    if exit_.setup is not None:
        exit_.setup(work)
    if not (work / "gates.yaml").exists():
        shutil.copy(GATES, work / "gates.yaml")  # the repository's gates, as a model repository carries them
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(_fake_gitlab(exit_.gitlab)) if exit_.gitlab is not None else ""
        steps = _commands(exit_, work, timeout, postgres=postgres, gitlab=url)
    if url:
        steps = [Step(s.argv, s.code, s.output.replace(url, "https://gitlab.example.com")) for s in steps]
    return steps


@contextlib.contextmanager
def _fake_gitlab(configure: Callable[[Any], None]) -> Iterator[str]:
    from tests.machine.test_gitlab_settings import FakeGitLab
    from tests.support.fake_http import FakeServer

    state = FakeGitLab()
    configure(state)
    with FakeServer(route=state.route) as srv:
        yield srv.url


def _commands(exit_: Exit, work: Path, timeout: float | None, *, postgres: str, gitlab: str) -> list[Step]:
    steps = []
    env = _env(tuple((k, v.replace("{gitlab}", gitlab)) for k, v in exit_.env))
    for given in (*exit_.before, exit_.argv):
        argv = tuple(a.replace("{postgres}", postgres) for a in given)
        res = subprocess.run(
            [*gatekeeper_command(), *argv],
            cwd=work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=exit_.timeout if timeout is None else timeout,
            check=False,
        )
        steps.append(Step(argv, res.returncode, res.stdout))
    return steps


ESC = "\x1b"


def job_log(steps: list[Step], *, when: dt.datetime | None = None) -> str:
    """The ``steps`` as gitlab-runner's job log shows a script ending with the first non-zero exit code."""
    code = next((s.code for s in steps if s.code), 0)
    t = int((when or dt.datetime(2026, 12, 4, 15, 0, tzinfo=dt.timezone.utc)).timestamp())
    k = f"{ESC}[0K"

    def start(n: int, name: str, title: str) -> str:
        return f"section_start:{t + n}:{name}\r{k}{k}{ESC}[36;1m{title}{ESC}[0;m\n"

    def end(n: int, name: str) -> str:
        return f"section_end:{t + n}:{name}\r{k}\n"

    lines = [
        f"{k}Running with gitlab-runner 17.6.0 (374d34fd){ESC}[0;m\n",
        f"{k}  on gpu-runner-01 t3_Xk9pQ, system ID: s_2f6b1c0e9a41{ESC}[0;m\n",
        start(0, "prepare_executor", 'Preparing the "docker" executor'),
        f"{k}Using Docker executor with image python:3.11 ...{ESC}[0;m\n",
        end(3, "prepare_executor"),
        start(3, "get_sources", "Getting source from Git repository"),
        f"{ESC}[32;1mFetching changes with git depth set to 20...{ESC}[0;m\n",
        end(5, "get_sources"),
        start(5, "step_script", 'Executing "step_script" stage of the job script'),
        *(
            f"{ESC}[32;1m$ {s.command}{ESC}[0;m\n{s.output}{'' if s.output.endswith(chr(10)) or not s.output else chr(10)}"
            for s in steps
        ),
        end(9, "step_script"),
        start(9, "cleanup_file_variables", "Cleaning up project directory and file based variables"),
        end(10, "cleanup_file_variables"),
        f"{ESC}[31;1mERROR: Job failed: exit code {code}\n{ESC}[0;m\n"
        if code
        else f"{ESC}[32;1mJob succeeded{ESC}[0;m\n",
    ]
    return "".join(lines)


def command_line(exit_: Exit) -> str:
    steps = (*exit_.before, exit_.argv)
    return " && ".join(
        shlex.join(["gatekeeper", *(x.replace("{postgres}", "db.internal:5432") for x in a)]) for a in steps
    )


# ---------------------------------------------------------------- inputs


def _artifacts(work: Path, stage: str = "verify_hip", mutate: Callable[[dict], None] | None = None) -> None:
    """A real stage artifact (a verify_hip report as the stage writes it on a CPU runner), optionally edited."""
    src = Path(__file__).parent / "gatekeeper_logs" / "inputs" / "verify_hip.json"
    doc = json.loads(src.read_text())
    if mutate is not None:
        mutate(doc)
    (work / "artifacts").mkdir(exist_ok=True)
    (work / "artifacts" / f"{stage}.json").write_text(json.dumps(doc, indent=1))


def _write(name: str, text: str) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)

    return setup


def _both(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        for step in steps:
            step(work)

    return setup


def _dup_key(work: Path) -> None:
    _artifacts(work)
    path = work / "artifacts" / "verify_hip.json"
    text = path.read_text()
    path.write_text(
        text.replace('"stage":', '"status": "passed",\n "stage":', 1).replace('{\n "status"', '{\n "status"')
    )


def _future_schema(doc: dict) -> None:
    doc["schema"] = "gatekeeper.stage/v9"


def _oversized(work: Path) -> None:
    _artifacts(work)
    # 5 MiB of gates: over the bound on a hand-written YAML file (core/budgets.py MAX_YAML_BYTES)
    (work / "gates.yaml").write_text("version: 1\ngates: {}\n" + ("#" * 79 + "\n") * (5 * 2**20 // 80))


def _newer_store(work: Path) -> None:
    _artifacts(work)
    conn = sqlite3.connect(work / "history.db")
    conn.execute("PRAGMA user_version = 99")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()


def _failing_gate(work: Path) -> None:
    _artifacts(work)
    (work / "gates.yaml").write_text(
        "version: 1\ngates:\n  smoke-exact:\n    metric: verify_hip.smoke_rel_error.matmul\n    pass: '<= 0'\n"
    )


def _breaker_opened(work: Path) -> None:
    for _ in range(3):
        subprocess.run(
            [
                *gatekeeper_command(),
                "breaker",
                "record",
                "--channel",
                "nightly",
                "--job",
                "functional_test",
                "--result",
                "fail",
                "--diagnosis",
                "functional_test: 3 checks failed",
            ],
            cwd=work,
            env=_env(()),
            check=True,
            capture_output=True,
            timeout=120,
        )


def _internal_bug(work: Path) -> None:
    # A real bug path: a gatekeeper module that raises where it should not (planted by this file, on the
    # import path ahead of the checkout), so the CLI's exit-70 handler runs as it would for any bug.
    pkg = work / "planted_bug"
    pkg.mkdir(exist_ok=True)
    (pkg / "sitecustomize.py").write_text(
        "import gatekeeper.evaluate.run as r\n"
        "def boom(*a, **k):\n"
        "    raise KeyError('functional_test')\n"
        "r.evaluate = boom\n"
    )
    _artifacts(work)


def _git(work: Path, *argv: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *argv],
        cwd=work,
        check=True,
        capture_output=True,
        timeout=60,
    )


def _target_without_gates(work: Path) -> None:
    # a merge request adds its own gates.yaml; the target branch has none
    _artifacts(work)
    _git(work, "init", "-q", "-b", "main")
    _git(work, "commit", "-q", "--allow-empty", "-m", "target branch")
    _git(work, "update-ref", "refs/remotes/origin/main", "HEAD")
    (work / "gates.yaml").write_text(
        "version: 1\ngates:\n  device-checks:\n    metric: verify_hip.checks.failed\n    pass: '<= 100'\n"
    )


def _bisect_repo(work: Path) -> None:
    _git(work, "init", "-q", "-b", "main")
    _git(work, "commit", "-q", "--allow-empty", "-m", "v1.0")
    _git(work, "tag", "v1.0")
    _git(work, "commit", "-q", "--allow-empty", "-m", "the suspect change")


def _corrupt_snapshot(work: Path) -> None:
    (work / "cache").mkdir()
    (work / "cache" / ".gatekeeper-snapshot.json").write_text('{"schema": "gatekeeper.cache_snapshot/v1", "files": {')


def _rock_not_loaded(work: Path) -> None:
    (work / "capture").mkdir()
    (work / "capture" / "rocminfo.txt").write_text("ROCk module is NOT loaded, possibly no GPU devices\n")


PLANTED = REPO / "tests" / "analyze" / "planted"


def _planted_repo(work: Path) -> None:
    shutil.copytree(PLANTED / "plantedmodels", work / "plantedmodels", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PLANTED / "cases.py", work / "cases.py")


_PLANTED_STAGE = (
    "stage",
    "functional_test",
    "--device",
    "cpu",
    "--out",
    "artifacts",
    "--categories",
    "none",
    "--no-traced",
    "--no-sparse",
    "--checkpoint-trials",
    "0",
    "--cases",
    "cases.py",
    "--check-timeout",
    "5",
)


def _verdict_of_pipeline_100(work: Path) -> None:
    _artifacts(work)
    shutil.copy(GATES, work / "gates.yaml")
    env = {**_env(()), "CI_PIPELINE_ID": "100", "CI_COMMIT_SHA": "a" * 40}
    subprocess.run(
        [*gatekeeper_command(), "evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "artifacts"],
        cwd=work, env=env, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert (work / "artifacts" / "verdict.json").is_file()


def _recorded_store(work: Path) -> None:
    """A history store with one run recorded (pipeline 100 at commit aaaa...), as evaluate --record leaves it."""
    _artifacts(work)
    (work / "recorded-gates.yaml").write_text(
        "version: 1\ngates:\n  hygiene:\n    metric: verify_hip.hygiene_problems\n    pass: '== 0'\n"
    )
    env = {**_env(()), "CI_PIPELINE_ID": "100", "CI_COMMIT_SHA": "a" * 40}
    argv = ["evaluate", "--artifacts", "artifacts", "--gates", "recorded-gates.yaml", "--out", "recorded"]
    subprocess.run(
        [*gatekeeper_command(), *argv, "--record", "sqlite:history.db"],
        cwd=work, env=env, capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    assert (work / "history.db").is_file()


# A model whose fresh processes scatter: each process of a round waits 1.0x, 1.3x, 1.6x ... the base time (a
# counter in the round's directory, GATEKEEPER_BISECT_OUT), as process medians scatter on a busy shared runner.
NOISY_MODEL = """\
import os
import time
from pathlib import Path

import torch

WAIT_S = {wait}


def _spread():
    out = os.environ.get("GATEKEEPER_BISECT_OUT")
    if not out:
        return 1.0
    fd = os.open(Path(out) / "processes", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, b".")
    os.close(fd)
    return 1.0 + 0.3 * ((Path(out) / "processes").stat().st_size - 1)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.wait = WAIT_S * _spread()

    def forward(self, x):
        time.sleep(self.wait)
        return self.linear(x)

    def example_input(self, batch_size=1):
        return torch.ones(batch_size, 8)


def build():
    torch.set_num_threads(1)
    return Model()
"""
LATENCY_GATES = (
    "version: 1\ngates:\n  latency-median:\n    metric: performance_baseline.latency_ms\n"
    '    compare: baseline\n    pass: "<= +10%"\n'
)


def _noisy_bisect_repo(work: Path) -> None:
    """v1.0 and a change 10% slower, in a model whose process medians scatter by 20%: the ends cannot be told
    apart at three processes a side."""
    _git(work, "init", "-q", "-b", "main")
    (work / "model.py").write_text(NOISY_MODEL.format(wait=0.002))
    (work / "gates.yaml").write_text(LATENCY_GATES)
    _git(work, "add", "model.py", "gates.yaml")
    _git(work, "commit", "-q", "-m", "v1.0")
    _git(work, "tag", "v1.0")
    (work / "model.py").write_text(NOISY_MODEL.format(wait=0.0022))
    _git(work, "commit", "-q", "-am", "the suspect change")


def _four_commits(work: Path) -> None:
    _git(work, "init", "-q", "-b", "main")
    for message in ("v1.0", "vendored kernels", "build flags", "the suspect change"):
        _git(work, "commit", "-q", "--allow-empty", "-m", message)
    _git(work, "tag", "v1.0", "HEAD~3")


def _torch_changed_store(work: Path) -> None:
    """Twelve nightly performance_baseline runs, 5% slower from the seventh, where the nightly torch changed
    (as evaluate --record stores them): bisect --since-change plans the torch versions between those two nights."""
    import numpy as np

    from gatekeeper.contract.stage_report import Metric
    from gatekeeper.history import RunInfo
    from gatekeeper.history.sqlite import SqliteStore
    from tests.support.builders import env, report

    store = SqliteStore(work / "history.db", create=True)
    rng = np.random.default_rng(3)
    for night in range(1, 13):
        after = night > 6
        level = 10.0 * (1.05 if after else 1.0)
        samples = [list(level * np.exp(rng.normal(0, 0.01)) * np.exp(rng.normal(0, 0.01, 20))) for _ in range(10)]
        torch = f"2.6.0.dev202611{6 + after:02d}+rocm6.2"
        stage = report(
            "performance_baseline",
            metrics={"latency_ms": Metric.of(float(np.median(np.concatenate(samples))), "ms", "lower", samples)},
            environment=env(torch_version=torch, channel="nightly"),
        )
        info = RunInfo("main", f"{night:040x}", str(1000 + night), "pass", f"2026-11-{night:02d}T02:00:00+00:00")
        store.save(stage, info)


def _control_character_in_environment(doc: dict) -> None:
    # a device name as a forged (or corrupt) artifact carries it: an escape sequence that would recolour the log
    doc["environment"]["device_name"] = "AMD Instinct MI300X\x1b[8m"


def _a_directory(name: str) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        (work / name).mkdir(parents=True)

    return setup


def _interrupting_model(work: Path) -> None:
    # a model module whose import interrupts the stage (SIGINT to its own process), as Ctrl-C or `timeout -s INT`
    (work / "interrupting.py").write_text(
        "import os\nimport signal\n\nos.kill(os.getpid(), signal.SIGINT)\n\n\ndef build():\n    return None\n"
    )


def _slower_head(work: Path) -> None:
    """A model whose head commit waits 4 ms a forward where its base waited 2: gatekeeper ab finds the regression."""
    steady = NOISY_MODEL.replace("self.wait = WAIT_S * _spread()", "self.wait = WAIT_S")  # no scatter
    _git(work, "init", "-q", "-b", "main")
    (work / "model.py").write_text(steady.format(wait=0.002))
    _git(work, "add", "model.py")
    _git(work, "commit", "-q", "-m", "base")
    (work / "model.py").write_text(steady.format(wait=0.004))
    _git(work, "commit", "-q", "-am", "the slower change")


def _a_file_named_artifacts(work: Path) -> None:
    (work / "artifacts").write_text("a file where the output directory should be\n")


EXITS: tuple[Exit, ...] = (
    # ---------------------------------------------------------------- exit 2: bad input
    Exit(
        "evaluate-gates-invalid-yaml",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "artifacts"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _both(_artifacts, _write("gates.yaml", "version: 1\ngates:\n  latency:\n    metric: [perf.latency\n")),
    ),
    Exit(
        "evaluate-gates-schema",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "artifacts"),
        2,
        "configuration_error",
        "gatekeeper-configuration",
        _both(_artifacts, _write("gates.yaml", "version: 1\ngates:\n  latency:\n    metrc: perf.latency\n")),
    ),
    Exit(
        "evaluate-artifacts-missing",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "out"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "evaluate-artifact-duplicate-key",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "out"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _dup_key,
    ),
    Exit(
        "evaluate-gates-oversized",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "out"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _oversized,
    ),
    Exit(
        "evaluate-artifact-schema-version",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "out"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        lambda w: _artifacts(w, mutate=_future_schema),
    ),
    Exit(
        "evaluate-store-unreachable",
        (
            "evaluate",
            "--artifacts",
            "artifacts",
            "--gates",
            "gates.yaml",
            "--out",
            "out",
            "--baseline",
            "postgresql://gatekeeper@127.0.0.1:9/results",
        ),
        2,
        "infra_error",
        "gatekeeper-store-unreachable",
        _artifacts,
        env=(("PGPASSWORD", "s3cret"),),  # a masked CI variable, never in the URL
    ),
    Exit(
        "evaluate-store-newer-schema",
        (
            "evaluate",
            "--artifacts",
            "artifacts",
            "--gates",
            "gates.yaml",
            "--out",
            "out",
            "--baseline",
            "sqlite:history.db",
        ),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _newer_store,
    ),
    Exit(
        # `when: pipeline:` names the kind of pipeline (tag, merge_request, schedule, branch, local): a misspelt
        # kind is refused when the gates are read, never a gate that silently never applies
        "evaluate-gates-when-pipeline-misspelt",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "out"),
        2,
        "configuration_error",
        "gatekeeper-configuration",
        _both(
            _artifacts,
            _write(
                "gates.yaml",
                "version: 1\ngates:\n  hygiene:\n    metric: verify_hip.hygiene_problems\n    pass: '== 0'\n"
                "    when:\n      pipeline: merge-request\n",
            ),
        ),
    ),
    Exit(
        "evaluate-artifact-control-character",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "out"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        lambda w: _artifacts(w, mutate=_control_character_in_environment),
    ),
    Exit(
        "stage-bad-model",
        ("stage", "functional_test", "--device", "cpu", "--out", "artifacts", "--model", "mypkg.models:build"),
        2,
        "configuration_error",
        "gatekeeper-configuration",
    ),
    Exit(
        "stage-device-cuda-without-gpu",
        ("stage", "verify_hip", "--device", "cuda", "--out", "artifacts"),
        2,
        "device_not_available",
        "gatekeeper-no-gpu",
    ),
    Exit(
        "stage-unknown",
        ("stage", "verify_hpi", "--out", "artifacts"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "analyze-log-missing",
        ("analyze", "artifacts/functional_test.log"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "doctor-capture-missing",
        ("doctor", "--from", "capture"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "advise-store-missing",
        ("advise", "--history", "sqlite:history.db"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "bisect-nothing-to-run",
        ("bisect", "--provider", "git", "--good", "v1.0", "--bad", "HEAD", "--out", "bisect"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "usage-error",
        ("evaluate", "--artifacts", "artifacts", "--no-such-option"),
        2,
        "configuration_error",
        "gatekeeper-usage-error",
    ),
    Exit(
        "evaluate-channel-mismatch",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "out", "--channel", "nightly"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _artifacts,
    ),
    Exit(
        "evaluate-gates-ref-lacks-gates",
        (
            "evaluate",
            "--artifacts",
            "artifacts",
            "--gates",
            "gates.yaml",
            "--out",
            "out",
            "--gates-ref",
            "refs/remotes/origin/main",
        ),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _target_without_gates,
        env=(("CI_MERGE_REQUEST_IID", "7"), ("CI_PIPELINE_SOURCE", "merge_request_event")),
    ),
    Exit(
        "cache-snapshot-corrupt",
        ("cache", "stats", "--root", "cache"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _corrupt_snapshot,
    ),
    Exit(
        "bisect-bad-measures-good",
        ("bisect", "--provider", "git", "--good", "v1.0", "--bad", "HEAD", "--out", "bisect", "--", "true"),
        2,
        "configuration_error",
        "gatekeeper-bisect-not-reproduced",
        _bisect_repo,
    ),
    Exit(
        "bisect-good-measures-bad",
        ("bisect", "--provider", "git", "--good", "v1.0", "--bad", "HEAD", "--out", "bisect", "--", "false"),
        2,
        "configuration_error",
        "gatekeeper-bisect-not-reproduced",
        _bisect_repo,
    ),
    Exit(
        "doctor-rock-not-loaded",
        ("doctor", "--from", "capture"),
        1,
        "device_not_available",
        "",
        _rock_not_loaded,
    ),
    Exit(
        "gpu-check-without-gpu",
        ("gpu-check", "--device", "cuda", "--out", "artifacts/gpu_check"),
        2,
        "device_not_available",
        "gatekeeper-no-gpu",
    ),
    Exit(
        # a GPU job (the component's device_required: true) on a runner without one: refused before any stage
        # runs (exit 2), its verdict being known
        "gpu-check-require-device-without-gpu",
        ("gpu-check", "--out", "artifacts/gpu_check"),
        2,
        "device_not_available",
        "gatekeeper-required-gpu-missing",
        env=(("GATEKEEPER_REQUIRE_DEVICE", "1"),),
    ),
    # ---------------------------------------------------------------- a stage's own failed checks
    Exit(
        "stage-check-timeout",
        _PLANTED_STAGE,
        1,
        "gpu_hang_or_timeout",
        "gatekeeper-failed-gpu-hang-or-timeout",
        _planted_repo,
        env=(("GK_PLANT", "hang"),),
    ),
    Exit(
        "stage-worker-crash",
        _PLANTED_STAGE,
        1,
        "segfault",
        "",
        _planted_repo,
        env=(("GK_PLANT", "segfault"),),
    ),
    # ---------------------------------------------------------------- notify: spooled, never the cause
    Exit(
        "notify-undelivered-after-blocked",
        ("notify", "slack", "--verdict", "artifacts/verdict.json", "--spool", "alerts", "--state", "alerts/state.json"),
        0,
        "numerical_mismatch",
        "gatekeeper-failed-numerical-mismatch",
        _failing_gate,
        env=(("SLACK_WEBHOOK_URL", "http://127.0.0.1:9/services/T000/B000/XXXX"),),
        before=(("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "artifacts"),),
    ),
    Exit(
        "evaluate-store-wrong-password",
        (
            "evaluate",
            "--artifacts",
            "artifacts",
            "--gates",
            "gates.yaml",
            "--out",
            "out",
            "--baseline",
            "postgresql://gatekeeper@{postgres}/postgres",
        ),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _artifacts,
        env=(("PGPASSWORD", "not-the-password"),),
        postgres=True,
    ),
    Exit(
        "notify-verdict-of-another-pipeline",
        ("notify", "gitlab", "--verdict", "artifacts/verdict.json", "--spool", "alerts"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _verdict_of_pipeline_100,
        env=(
            ("CI_PIPELINE_ID", "101"),
            ("CI_COMMIT_SHA", "b" * 40),
            ("CI_PROJECT_ID", "5"),
            ("CI_API_V4_URL", "http://127.0.0.1:9/api/v4"),
            ("GATEKEEPER_GITLAB_TOKEN", "glpat-not-a-real-token"),
        ),
    ),
    Exit(
        "report-artifacts-missing",
        ("report", "--artifacts", "artifacts", "--out", "report.html"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "matrix-file-invalid",
        ("matrix", "--history", "sqlite:history.db", "--matrix-file", "matrix.yaml", "--out", "matrix.html"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _write("matrix.yaml", "torch: [2.5\n"),
    ),
    Exit(
        "ab-outside-a-repository",
        ("ab", "--base", "main", "--stage", "verify_hip", "--out", "ab"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "cache-prune-bad-size",
        ("cache", "prune", "--root", "cache", "--max-size", "lots"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "evaluate-record-spooled",
        (
            "evaluate",
            "--artifacts",
            "artifacts",
            "--gates",
            "gates.yaml",
            "--out",
            "out",
            "--record",
            "postgresql://gatekeeper@127.0.0.1:9/results",
        ),
        2,
        "infra_error",
        "gatekeeper-record-spooled",
        _both(
            _artifacts,
            _write(
                "gates.yaml",
                "version: 1\ngates:\n  hygiene:\n    metric: verify_hip.hygiene_problems\n    pass: '== 0'\n",
            ),
        ),
    ),
    # ---------------------------------------------------------------- verdict failures
    Exit(
        "evaluate-blocked-by-gate",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "artifacts"),
        1,
        "numerical_mismatch",
        "gatekeeper-failed-numerical-mismatch",
        _failing_gate,
    ),
    Exit(
        "evaluate-nothing-ran",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "artifacts"),
        1,
        "configuration_error",
        "gatekeeper-configuration",
        lambda w: (w / "artifacts").mkdir(),
    ),
    # ---------------------------------------------------------------- breaker
    Exit(
        "breaker-open",
        ("breaker", "check", "--channel", "nightly", "--job", "functional_test", "--failures", "3"),
        4,
        "infra_error",
        "gatekeeper-breaker-open",
        _breaker_opened,
    ),
    Exit(
        "breaker-policy-nightly-on-tag",
        ("breaker", "check", "--channel", "nightly", "--job", "functional_test", "--policy-only"),
        1,
        "configuration_error",
        "gatekeeper-breaker-policy",
        env=(("CI_COMMIT_TAG", "v1.2.0"),),
    ),
    # ---------------------------------------------------------------- a bug in gatekeeper
    Exit(
        "internal-error",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "out"),
        70,
        "infra_error",
        "gatekeeper-internal-error",
        _internal_bug,
        env=(("PYTHONPATH", "planted_bug"),),
    ),
    # ---------------------------------------------------------------- bisect: ends that cannot be told apart
    Exit(
        "bisect-ends-inconclusive",
        (
            "bisect",
            "--provider",
            "git",
            "--good",
            "v1.0",
            "--bad",
            "HEAD",
            "--stage",
            "performance_baseline",
            "--gates",
            "gates.yaml",
            "--max-processes",
            "3",
            "--out",
            "bisect",
            "--no-bundle",
            "--",
            "--model",
            "model:build",
            "--processes",
            "3",
            "--iterations",
            "20",
            "--warmup",
            "5",
        ),
        2,
        "infra_error",
        "gatekeeper-bisect-noisy",
        _noisy_bisect_repo,
    ),
    Exit(
        "bisect-bad-end-skipped",
        (
            "bisect",
            "--provider",
            "git",
            "--good",
            "v1.0",
            "--bad",
            "HEAD",
            "--out",
            "bisect",
            "--",
            # 0 at v1.0, 125 (skip: this candidate cannot be tested) everywhere after it
            "sh",
            "-c",
            'test "$(git log -1 --format=%s)" = v1.0 || exit 125',
        ),
        2,
        "configuration_error",
        "gatekeeper-bisect-undecided",
        _bisect_repo,
    ),
    Exit(
        "bisect-culprit-range-undecided",
        (
            "bisect",
            "--provider",
            "git",
            "--good",
            "v1.0",
            "--bad",
            "HEAD",
            "--out",
            "bisect",
            "--no-bundle",
            "--",
            # good at v1.0, bad at the newest commit, and the two between cannot be tested (exit 125, skip)
            "sh",
            "-c",
            'case "$(git log -1 --format=%s)" in v1.0) exit 0;; "the suspect change") exit 1;; *) exit 125;; esac',
        ),
        3,
        "configuration_error",
        "gatekeeper-bisect-range",
        _four_commits,
    ),
    # ---------------------------------------------------------------- ab: the head measured against its base
    Exit(
        "ab-regression",
        (
            "ab",
            "--base",
            "HEAD~1",
            "--out",
            "ab",
            "--max-processes",
            "6",
            "--max-cv",
            "0.3",
            "--",
            "--model",
            "model:build",
            "--processes",
            "3",
            "--iterations",
            "20",
            "--warmup",
            "5",
        ),
        1,
        "performance_regression",
        "gatekeeper-performance-regression",
        _slower_head,
    ),
    # ---------------------------------------------------------------- interrupted (SIGINT)
    Exit(
        "stage-interrupted",
        ("stage", "functional_test", "--device", "cpu", "--out", "artifacts", "--model", "interrupting:build"),
        2,
        "infra_error",
        "gatekeeper-interrupted",
        _interrupting_model,
    ),
    Exit(
        # the command bisect runs interrupts bisect (SIGINT to its parent), as Ctrl-C in a terminal would
        "bisect-interrupted",
        (
            "bisect",
            "--provider",
            "git",
            "--good",
            "v1.0",
            "--bad",
            "HEAD",
            "--out",
            "bisect",
            "--no-bundle",
            "--",
            "sh",
            "-c",
            "kill -INT $PPID; sleep 5",
        ),
        2,
        "infra_error",
        "gatekeeper-interrupted",
        _bisect_repo,
    ),
    # ---------------------------------------------------------------- bisect --since-change (the nightly job)
    Exit(
        "bisect-since-change-without-history",
        ("bisect", "--since-change", "cache/since-change.json", "--out", "bisect"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "bisect-since-change-state-is-a-directory",
        ("bisect", "--since-change", "cache", "--history", "sqlite:history.db", "--out", "bisect"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _both(_recorded_store, _a_directory("cache")),
    ),
    Exit(
        "bisect-since-change-torch-without-index-url",
        ("bisect", "--since-change", "cache/since-change.json", "--history", "sqlite:history.db", "--out", "bisect"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _torch_changed_store,
    ),
    Exit(
        "bisect-since-change-store-unreachable",
        (
            "bisect",
            "--since-change",
            "cache/since-change.json",
            "--history",
            "postgresql://gatekeeper@127.0.0.1:9/results",
            "--out",
            "bisect",
        ),
        2,
        "infra_error",
        "gatekeeper-store-unreachable",
        env=(("PGPASSWORD", "s3cret"),),
    ),
    # ---------------------------------------------------------------- history
    Exit(
        "history-store-spec-unknown",
        ("history", "changes", "--history", "sqlit:history.db"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "history-store-missing",
        ("history", "changes", "--history", "sqlite:history.db"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "history-store-unreachable",
        ("history", "changes", "--history", "postgresql://gatekeeper@127.0.0.1:9/results"),
        2,
        "infra_error",
        "gatekeeper-store-unreachable",
        env=(("PGPASSWORD", "s3cret"),),
    ),
    Exit(
        "history-store-newer-schema",
        ("history", "export", "--history", "sqlite:history.db", "--out", "history.jsonl"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _newer_store,
    ),
    Exit(
        "history-missing-history-option",
        ("history", "changes", "--metric", "latency_ms"),
        2,
        "configuration_error",
        "gatekeeper-usage-error",
    ),
    Exit(
        "history-changes-bad-since",
        ("history", "changes", "--history", "sqlite:history.db", "--since", "yesterday"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _recorded_store,
    ),
    Exit(
        "history-platforms-unknown-commit",
        ("history", "platforms", "--history", "sqlite:history.db", "--commit", "abcdef1"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _recorded_store,
    ),
    Exit(
        "history-platforms-not-a-commit",
        ("history", "platforms", "--history", "sqlite:history.db", "--commit", "main"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _recorded_store,
    ),
    Exit(
        "history-platforms-base-is-the-commit",
        ("history", "platforms", "--history", "sqlite:history.db", "--commit", "a" * 12, "--base", "a" * 40),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _recorded_store,
    ),
    Exit(
        "history-platforms-bad-min-effect",
        ("history", "platforms", "--history", "sqlite:history.db", "--commit", "a" * 12, "--min-effect", "-2"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _recorded_store,
    ),
    Exit(
        "history-alarms-store-missing",
        ("history", "alarms", "--history", "sqlite:history.db"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "history-alarms-limit-too-small",
        ("history", "alarms", "--history", "sqlite:history.db", "--limit", "1"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _recorded_store,
    ),
    Exit(
        "history-alarms-bad-format",
        ("history", "alarms", "--history", "sqlite:history.db", "--format", "csv"),
        2,
        "configuration_error",
        "gatekeeper-usage-error",
        _recorded_store,
    ),
    Exit(
        "history-alarms-gates-schema",
        ("history", "alarms", "--history", "sqlite:history.db", "--gates", "gates.yaml"),
        2,
        "configuration_error",
        "gatekeeper-configuration",
        _both(_recorded_store, _write("gates.yaml", "version: 1\ngates:\n  latency:\n    metrc: perf.latency\n")),
    ),
    Exit(
        "history-anchor-without-reason",
        ("history", "anchor", "--history", "sqlite:history.db", "--set", "100"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _recorded_store,
    ),
    Exit(
        "history-anchor-unknown-run",
        ("history", "anchor", "--history", "sqlite:history.db", "--set", "999", "--by", "ci", "--reason", "release"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _recorded_store,
    ),
    Exit(
        "history-import-file-missing",
        ("history", "import", "--from", "history.jsonl", "--into", "sqlite:history.db"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "history-import-bad-line",
        ("history", "import", "--from", "history.jsonl", "--into", "sqlite:history.db"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _write("history.jsonl", '{"schema": "gatekeeper.history_record/v1", "run\n'),
    ),
    # ---------------------------------------------------------------- pipeline
    Exit(
        "pipeline-gates-missing",
        ("pipeline", "--gates", "ci/gates.yaml", "--out", "artifacts"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
    ),
    Exit(
        "pipeline-gates-schema",
        ("pipeline", "--gates", "gates.yaml", "--out", "artifacts"),
        2,
        "configuration_error",
        "gatekeeper-configuration",
        _write("gates.yaml", "version: 1\ngates:\n  latency:\n    metrc: perf.latency\n"),
    ),
    Exit(
        "pipeline-out-not-a-directory",
        ("pipeline", "--out", "artifacts"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        _a_file_named_artifacts,
    ),
    Exit(
        "pipeline-device-cuda-without-gpu",
        ("pipeline", "--device", "cuda", "--out", "artifacts"),
        2,
        "device_not_available",
        "gatekeeper-no-gpu",
    ),
    Exit(
        "evaluate-require-device-cpu-artifacts",
        ("evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "out"),
        1,
        "device_not_available",
        "gatekeeper-required-gpu-missing",
        _both(
            _artifacts,
            _write(
                "gates.yaml",
                "version: 1\ngates:\n  hygiene:\n    metric: verify_hip.hygiene_problems\n    pass: '== 0'\n",
            ),
        ),
        env=(("GATEKEEPER_REQUIRE_DEVICE", "1"),),
    ),
    # ---------------------------------------------------------------- doctor gitlab
    Exit(
        "doctor-gitlab-no-token",
        ("doctor", "gitlab", "--project", "ml/model-repo"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        env=(("CI_API_V4_URL", "https://gitlab.example.com/api/v4"),),
    ),
    Exit(
        "doctor-gitlab-no-api-url",
        ("doctor", "gitlab", "--project", "ml/model-repo"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        env=(("GATEKEEPER_GITLAB_TOKEN", "glpat-not-a-real-token"),),
    ),
    Exit(
        "doctor-gitlab-no-project",
        ("doctor", "gitlab"),
        2,
        "configuration_error",
        "gatekeeper-input-error",
        env=(
            ("GATEKEEPER_GITLAB_TOKEN", "glpat-not-a-real-token"),
            ("CI_API_V4_URL", "https://gitlab.example.com/api/v4"),
        ),
    ),
    Exit(
        "doctor-gitlab-token-rejected",
        ("doctor", "gitlab", "--project", "platform/model"),
        1,
        "configuration_error",
        "gatekeeper-gitlab-token-rejected",
        env=(("GATEKEEPER_GITLAB_TOKEN", "glpat-expired-or-revoked00"), ("CI_API_V4_URL", "{gitlab}/api/v4")),
        gitlab=lambda project: None,
    ),
    Exit(
        "doctor-gitlab-gate-not-enforced",
        ("doctor", "gitlab", "--project", "platform/model"),
        1,
        "configuration_error",
        "gatekeeper-gitlab-gate-not-enforced",
        env=(("GATEKEEPER_GITLAB_TOKEN", "glpat-DOCTORdoctorDOCTOR1234"), ("CI_API_V4_URL", "{gitlab}/api/v4")),
        gitlab=lambda project: project.project.update(only_allow_merge_if_pipeline_succeeds=False),
    ),
    Exit(
        # a secret variable not masked: the check is named after the variable (variables[KEY])
        "doctor-gitlab-variable-not-masked",
        ("doctor", "gitlab", "--project", "platform/model"),
        1,
        "configuration_error",
        "gatekeeper-gitlab-gate-not-enforced",
        env=(("GATEKEEPER_GITLAB_TOKEN", "glpat-DOCTORdoctorDOCTOR1234"), ("CI_API_V4_URL", "{gitlab}/api/v4")),
        gitlab=lambda project: setattr(
            project, "variables", [{"key": "GATEKEEPER_GITLAB_TOKEN", "masked": False, "protected": False}]
        ),
    ),
    Exit(
        "doctor-gitlab-unreachable",
        ("doctor", "gitlab", "--project", "ml/model-repo"),
        1,
        "infra_error",
        "gatekeeper-gitlab-unreachable",
        env=(("GATEKEEPER_GITLAB_TOKEN", "glpat-not-a-real-token"), ("CI_API_V4_URL", "http://127.0.0.1:9/api/v4")),
    ),
)

BY_NAME = {e.name: e for e in EXITS}


def _anonymous(text: str, work: str) -> str:
    """This machine's paths as a CI job's would read (the job's directory, the checkout, the interpreter's)."""
    text = text.replace(work, "/builds/ml/model-repo").replace(str(REPO), "/builds/ml/gatekeeper")
    return text.replace(str(Path(sys.executable).parent), "/usr/local/bin")


def main(argv: list[str] | None = None) -> int:
    import tempfile

    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else Path(__file__).parent / "gatekeeper_logs"
    only = set(args[1:])

    from tests.support import postgres as pg

    server_cm = contextlib.contextmanager(pg.postgres_server.__wrapped__)  # the tests' session server, by hand
    commit = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    today = dt.date.today().isoformat()
    index_path = out / "index.jsonl"
    index = {}
    if index_path.exists():
        for line in index_path.read_text().splitlines():
            row = json.loads(line)
            index[row["file"]] = row
    for exit_ in EXITS:
        if only and exit_.name not in only:
            continue
        with (
            tempfile.TemporaryDirectory(prefix="gk-exit-") as tmp,
            server_cm() if exit_.postgres else contextlib.nullcontext() as server,
        ):
            where = f"{server.host}:{server.port}" if server is not None else ""
            steps = run(exit_, Path(tmp), postgres=where)
            if where:
                steps = [
                    Step(tuple(a.replace(where, "db.internal:5432") for a in s.argv), s.code,
                         s.output.replace(where, "db.internal:5432"))
                    for s in steps
                ]  # fmt: skip
        steps = [Step(s.argv, s.code, _anonymous(s.output, tmp)) for s in steps]
        code = steps[-1].code
        file = f"{exit_.name}.log"
        (out / file).write_text(job_log(steps))
        index[file] = {
            "file": file,
            "command": command_line(exit_),
            "exit_code": code,
            "category": exit_.category,
            "known_issue": exit_.known_issue,
            "provenance": f"produced by gatekeeper {commit} running `{command_line(exit_)}` on {today} "
            "(tests/analyze/gatekeeper_exits.py: its inputs; the job log framing as gitlab-runner 17 prints it)",
        }
        print(f"{exit_.name}: exit {code}")
    index_path.write_text("".join(json.dumps(index[k]) + "\n" for k in sorted(index)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
