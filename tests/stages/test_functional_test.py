"""The functional_test stage through the real CLI: a reduced end-to-end run, and bad input."""

from __future__ import annotations

import pytest

from gatekeeper.cli import main

CASES = """
import ctypes
import os
import time

import torch


def case_before(device):
    x = torch.arange(6.0, device=device)
    assert float(x.sum()) == 15.0
    return "sum ok"


def case_segfault(device):
    ctypes.string_at(0)


def case_abort(device):
    os.abort()


def case_hang(device):
    time.sleep(600)


def case_wrong(device):
    assert torch.ones(2, device=device).sum() == 3, "custom layer output differs"


def case_after(device):
    assert torch.zeros(3, device=device).sum() == 0


def helper_not_a_case(device):
    raise RuntimeError("never called")
"""

QUICK = ["--device", "cpu", "--categories", "none", "--no-traced", "--no-sparse", "--checkpoint-trials", "0"]


@pytest.mark.slow
def test_full_stage_reduced_with_crashing_user_cases(tmp_path):
    """The whole stage (every category, traced model, checkpoint, sparse) with fewer seeds and trials,
    plus a team's cases file whose cases segfault, abort and hang: each is a failed check with the
    signal or the timeout, and the stage goes on to the traced, checkpoint and sparse groups."""
    from gatekeeper.contract.stage_report import read_stage

    cases = tmp_path / "team_cases.py"
    cases.write_text(CASES)
    out = tmp_path / "out"
    args = ["stage", "functional_test", "--device", "cpu", "--out", str(out), "--seeds", "2"]
    args += ["--dtypes", "float32,bfloat16", "--checkpoint-trials", "1", "--checkpoint-steps", "1"]
    args += ["--cases", str(cases), "--check-timeout", "8", "--model", "tests.support.functional_models:tiny"]
    assert main(args) == 1  # blocked by the crashing user cases only
    report = read_stage(out / "functional_test.json")  # validates against the stage schema
    checks = {c.name: c for c in report.checks}
    assert len(checks) == len(report.checks)

    # user cases: isolated, and the stage went on
    assert checks["user.case_before"].status == "passed"
    assert checks["user.case_before"].message == "sum ok"
    assert checks["user.case_segfault"].status == "failed"
    assert "SIGSEGV" in checks["user.case_segfault"].message
    assert checks["user.case_abort"].status == "failed"
    assert "SIGABRT" in checks["user.case_abort"].message
    assert checks["user.case_hang"].status == "failed"
    assert "timed out after 8 s" in checks["user.case_hang"].message
    assert checks["user.case_wrong"].status == "failed"
    assert "custom layer output differs" in checks["user.case_wrong"].message
    assert checks["user.case_after"].status == "passed"
    assert "user.helper_not_a_case" not in checks
    assert report.metrics["user_case_pass_rate"].value == pytest.approx(2 / 6)
    assert report.summary["worker_restarts"] == 3  # one per crash or hang, not one per case
    failed = {n for n, c in checks.items() if c.status != "passed" and c.status != "skipped"}
    assert failed == {"user.case_segfault", "user.case_abort", "user.case_hang", "user.case_wrong"}

    # the catalog and the other groups
    assert {n.split(".")[0] for n in checks} >= {
        "basic_math", "convolution", "reduction", "matrix", "custom_backward", "distributed",
        "traced", "checkpoint", "sparse", "user",
    }  # fmt: skip
    m = report.metrics
    for name in ("basic_math", "convolution", "reduction", "matrix", "custom_backward", "distributed"):
        assert m[f"op_pass_rate.{name}"].value == 1.0
    assert m["op_pass_rate"].value == 1.0
    assert m["max_rel_error.float32"].value < 1e-4
    assert "max_rel_error.float16" not in m  # not asked for
    n_cases = sum(v["cases"] for k, v in report.summary["categories"].items() if k not in ("distributed", "attention"))
    assert len(m["max_rel_error.float32"].flat_samples) == 2 * n_cases  # one sample per case x seed
    assert m["max_rel_error.bfloat16"].value > m["max_rel_error.float32"].value
    assert m["checkpoint_restore_rate"].value == 1.0
    assert m["sparse_pass_rate"].value == 1.0
    assert m["traced_op_pass_rate"].value == 1.0
    assert m["model_grad_cosine_min"].value > 0.9999
    assert report.summary["categories"]["basic_math"]["cases"] >= 48

    # every check exactly once in the JUnit; the markdown table is there
    from junitparser import JUnitXml

    names = [case.name for suite in JUnitXml.fromfile(str(out / "functional_test.junit.xml")) for case in suite]
    assert sorted(names) == sorted(checks)
    md = (out / "functional_test.md").read_text()
    assert "| basic_math |" in md
    assert "| bfloat16 |" in md


def test_a_bad_cases_file_is_an_input_error(tmp_path, capsys):
    missing = tmp_path / "nope.py"
    rc = main(["stage", "functional_test", *QUICK, "--out", str(tmp_path / "o"), "--cases", str(missing)])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("gatekeeper: ")
    assert "nope.py" in err[0]
    broken = tmp_path / "broken.py"
    broken.write_text("def case_x(device):\n    return (\n")
    assert main(["stage", "functional_test", *QUICK, "--out", str(tmp_path / "o"), "--cases", str(broken)]) == 2
    assert "syntax error" in capsys.readouterr().err
    empty = tmp_path / "empty.py"
    empty.write_text("def helper(device):\n    pass\n")
    assert main(["stage", "functional_test", *QUICK, "--out", str(tmp_path / "o"), "--cases", str(empty)]) == 2
    assert "no top-level function named case_*" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value", "text"),
    [
        ("--categories", "basic_math,bogus", "unknown value bogus"),
        ("--dtypes", "float8", "unknown value float8"),
        ("--seeds", "0", "--seeds: 0 is below 1"),
    ],
)
def test_bad_options_are_one_line_input_errors(tmp_path, capsys, option, value, text):
    assert main(["stage", "functional_test", *QUICK, "--out", str(tmp_path), option, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert text in err[0]
