"""Principle 5: one bounded number reader for every JSON, YAML and sqlite input.

A number is accepted when it is finite and inside the 64-bit integer range (``gatekeeper/core/numbers.py``);
a 400-digit integer, NaN or an infinity is exit 2 naming the field, never exit 70. Stored history rows go
through the same strict stage-report reader as artifacts: a bad row is skipped with a warning naming it.
Text from inputs reaches plots as literal text (no mathtext, no TeX).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.contract.stage_report import write_stage
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode
from gatekeeper.history.sqlite import SqliteStore
from tests.support.builders import report
from tests.support.fake_http import refused_url
from tests.support.notify_inputs import write_verdict
from tests.support.release_history import environment, performance

REPO = Path(__file__).resolve().parents[2]
HUGE = "1" + "0" * 400  # an integer Python reads, and no float can hold


def _artifact(tmp_path: Path, value_text: str, *, field: str = "value") -> Path:
    art = tmp_path / "art"
    art.mkdir(exist_ok=True)
    path = write_stage(report("functional_test", {"op_pass_rate": 1.0}), art)
    doc = json.loads(path.read_text())
    doc["metrics"]["op_pass_rate"][field] = "@@"
    path.write_text(json.dumps(doc).replace('"@@"', value_text))
    return art


@pytest.mark.parametrize("text", [HUGE, "-" + HUGE, "NaN", "Infinity", "-Infinity", "1e999", "9.3e18"])
def test_evaluate_refuses_a_hostile_metric_value_naming_the_field(tmp_path, capsys, text):
    art = _artifact(tmp_path, text)
    code = main(["evaluate", "--artifacts", str(art), "--gates", str(REPO / "gates.yaml"), "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == ExitCode.INPUT_ERROR, err
    assert "metrics.op_pass_rate.value" in err
    assert "functional_test.json" in err
    assert HUGE not in err  # the number is named, not printed whole


def test_a_number_in_range_is_read(tmp_path, capsys):
    art = _artifact(tmp_path, str(2**62))
    main(["evaluate", "--artifacts", str(art), "--gates", str(REPO / "gates.yaml"), "--out", str(tmp_path)])
    assert "op_pass_rate.value" not in capsys.readouterr().err


def _huge_verdict(tmp_path: Path) -> Path:
    path = write_verdict(tmp_path, context={"mr_iid": 7, "pipeline_id": "12"})
    doc = json.loads(path.read_text())
    doc["gates"][0]["value"] = "@@"
    path.write_text(json.dumps(doc).replace('"@@"', HUGE))
    return path


def test_notify_gitlab_refuses_a_huge_number_in_a_verdict(tmp_path, capsys, monkeypatch):
    verdict = _huge_verdict(tmp_path)
    for name, value in {
        "GATEKEEPER_GITLAB_TOKEN": "glpat-" + "x" * 20, "CI_API_V4_URL": refused_url(), "CI_PROJECT_ID": "5",
        "CI_MERGE_REQUEST_IID": "7", "CI_COMMIT_SHA": "0" * 40, "CI_PIPELINE_ID": "12",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    code = main(["notify", "gitlab", "--verdict", str(verdict), "--spool", str(tmp_path / "spool"), "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == ExitCode.INPUT_ERROR, err
    assert "gates[0].value" in err


def test_report_refuses_a_huge_number_in_a_verdict(tmp_path, capsys):
    art = tmp_path / "art"
    art.mkdir()
    _huge_verdict(art)
    code = main(["report", "--artifacts", str(art), "--out", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert code == ExitCode.INPUT_ERROR, err
    assert "gates[0].value" in err


def _store_with_bad_row(tmp_path: Path, mutate) -> Path:
    db = tmp_path / "h.db"
    store = SqliteStore(db)
    from gatekeeper.history import RunInfo

    good = report("functional_test", {"op_pass_rate": 1.0})
    store.save(good, RunInfo(ref="main", verdict="pass", recorded_at="2026-12-01T00:00:00+00:00"))
    doc = good.to_dict()
    mutate(doc)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO results (stage, status, channel, device_kind, arch, ref, verdict, recorded_at, fingerprint, "
            "report) VALUES ('functional_test', 'passed', 'stable', 'rocm', 'gfx90a', 'main', 'pass', "
            "'2026-12-02T00:00:00+00:00', '{}', ?)",
            (json.dumps(doc).replace('"@@"', HUGE),),
        )
    return db


@pytest.mark.parametrize(
    ("mutate", "named"),
    [
        (lambda d: d.pop("stage"), "stage"),
        (lambda d: d["metrics"]["op_pass_rate"].update(value="@@"), "metrics.op_pass_rate.value"),
        (lambda d: d["environment"].pop("channel"), "environment"),
        (lambda d: d.update(checks=[{"name": 1}]), "checks"),
    ],
    ids=["no stage", "huge value", "no channel", "bad check"],
)
def test_a_bad_history_row_is_skipped_with_a_warning_naming_it(tmp_path, capsys, mutate, named):
    db = _store_with_bad_row(tmp_path, mutate)
    art = tmp_path / "art"
    art.mkdir()
    write_stage(report("functional_test", {"op_pass_rate": 1.0}), art)
    code = main(
        ["evaluate", "--artifacts", str(art), "--gates", str(REPO / "gates.yaml"), "--out", str(tmp_path),
         "--baseline", f"sqlite:{db}"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code in (ExitCode.PASS, ExitCode.WARN, ExitCode.BLOCKED), err
    assert "sqlite:2" in err, err  # the row
    assert named in err, err  # and the field
    # the good row is still the baseline, and history() (the report's trends) skips the bad one too
    store = SqliteStore(db)
    assert [info.run_id for info, _ in store.history("functional_test")] == ["sqlite:1"]
    assert any("sqlite:2" in line for line in store.skipped)


def test_report_draws_hostile_units_as_literal_text(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    art = tmp_path / "art"
    art.mkdir()
    perf = performance(environment(), started_at="2026-12-01T00:00:00+00:00")
    metrics = dict(perf.metrics)
    unit = r"ms $\frac{$"
    metrics["latency_ms"] = type(metrics["latency_ms"])(
        metrics["latency_ms"].value, unit, "lower", metrics["latency_ms"].samples
    )
    write_stage(type(perf)(**{**perf.__dict__, "metrics": metrics}), art)
    code = main(["report", "--artifacts", str(art), "--out", str(tmp_path / "r.html")])
    assert code == ExitCode.PASS, capsys.readouterr().err
    html = (tmp_path / "r.html").read_text()
    assert r"latency per iteration (ms $\frac{$)" in html  # drawn as the characters it holds


def test_plot_text_is_escaped_for_mathtext():
    from gatekeeper.report.plots import plot_text

    for text in [r"$\frac{a}{b}$", r"ms $\frac{$", r"a\$b $x$", "$$", "\\", r"\$"]:
        escaped = plot_text(text)
        from matplotlib.cbook import is_math_text

        assert not is_math_text(escaped), text
        assert escaped.replace(r"\$", "$") == text


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), -float("inf"), 10**400, -(10**400), 2**63, -(2**63) - 1, 1e300],
)
def test_the_reader_refuses_what_is_out_of_range(value):
    from gatekeeper.core import numbers

    with pytest.raises(InputError) as err:
        numbers.check_tree({"a": [{"b": value}]}, "f.json")
    assert err.value.where == "a[0].b"


@pytest.mark.parametrize("value", [0, -1, 2**63 - 1, -(2**63), 1.5e-300, 9.2e18, True, "1e999", None])
def test_the_reader_keeps_what_is_in_range(value):
    from gatekeeper.core import numbers

    numbers.check_tree({"a": [{"b": value}]}, "f.json")


def test_gate_rules_use_the_bounded_reader(tmp_path, capsys):
    gates = tmp_path / "gates.yaml"
    gates.write_text("version: 1\ngates:\n  g:\n    metric: functional_test.op_pass_rate\n    pass: '>= 1e999'\n")
    art = _artifact(tmp_path, "1.0")
    code = main(["evaluate", "--artifacts", str(art), "--gates", str(gates), "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == ExitCode.INPUT_ERROR, err
    assert "1e999" in err


def test_yaml_numbers_use_the_bounded_reader(tmp_path, capsys):
    gates = tmp_path / "gates.yaml"
    gates.write_text(
        f"version: 1\ngates:\n  g:\n    metric: functional_test.op_pass_rate\n    pass: '>= 0.5'\n    alpha: {HUGE}\n"
    )
    art = _artifact(tmp_path, "1.0")
    code = main(["evaluate", "--artifacts", str(art), "--gates", str(gates), "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == ExitCode.INPUT_ERROR, err
    assert "gates.g.alpha" in err


def test_plots_never_use_tex(monkeypatch):
    """A matplotlibrc in the working directory (the merge request's) may turn text.usetex on: never obeyed."""
    import shutil

    pytest.importorskip("matplotlib")
    import matplotlib.text

    from gatekeeper.contract.stage_report import Metric
    from gatekeeper.report.plots import latency_plot

    made: list[bool] = []
    real = matplotlib.text.Text.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        made.append(bool(self.get_usetex()))

    monkeypatch.setattr(matplotlib.text.Text, "__init__", spy)
    monkeypatch.setitem(matplotlib.rcParams, "text.usetex", True)
    monkeypatch.setattr(shutil, "which", lambda *_a, **_k: None)  # no TeX run, whatever is installed
    plot = latency_plot(Metric.of(2.0, "ms $x$", "lower", [1.0, 2.0, 3.0]), None, {})
    assert "<svg" in plot.svg
    assert made
    assert not any(made)


def test_a_soak_window_with_a_huge_number_is_skipped(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from gatekeeper.contract.soak_series import SERIES_FILE, read_series

    art = tmp_path / "art"
    art.mkdir()
    write_stage(performance(environment(), started_at="2026-12-01T00:00:00+00:00"), art)
    rows = [f'{{"t_s": {t}, "throughput": 10.0, "memory_mb": 5.0}}' for t in ("1", HUGE, "2", "3")]
    (art / SERIES_FILE).write_text("\n".join(rows) + "\n")
    assert [r["t_s"] for r in read_series(art / SERIES_FILE)] == [1, 2, 3]
    code = main(["report", "--artifacts", str(art), "--out", str(tmp_path / "r.html")])
    assert code == ExitCode.PASS, capsys.readouterr().err
