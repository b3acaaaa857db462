from __future__ import annotations

import math

import pytest
import torch

from stages.functional.compare import rel_error
from stages.functional.report import Tally, percentile, write_markdown
from stages.functional.tolerances import DTYPES, TOLERANCES, tolerance


def test_rel_error_is_normwise_and_handles_parts():
    ref = torch.tensor([1.0, -2.0, 4.0], dtype=torch.float64)
    got = torch.tensor([1.0, -2.0, 4.04])
    assert rel_error(got, ref) == pytest.approx(0.01, rel=1e-3)
    assert rel_error((got, torch.tensor([3])), (ref, torch.tensor([3]))) == pytest.approx(0.01, rel=1e-3)


def test_rel_error_rejects_wrong_shapes_integers_and_misplaced_nans():
    with pytest.raises(AssertionError, match="shape"):
        rel_error(torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.float64))
    with pytest.raises(AssertionError, match="integer/bool elements differ"):
        rel_error(torch.tensor([1, 2]), torch.tensor([1, 3]))
    assert math.isinf(rel_error(torch.tensor([float("nan"), 1.0]), torch.tensor([0.5, 1.0], dtype=torch.float64)))
    ref = torch.tensor([float("inf"), 1.0], dtype=torch.float64)
    assert rel_error(torch.tensor([float("inf"), 1.0]), ref) == 0.0
    assert math.isinf(rel_error(torch.tensor([-float("inf"), 1.0]), ref))


def test_rel_error_of_empty_and_non_tensor_results():
    assert rel_error(torch.zeros(0, 5), torch.zeros(0, 5, dtype=torch.float64)) == 0.0
    assert rel_error(True, True) == 0.0
    with pytest.raises(AssertionError, match="!= reference"):
        rel_error(3, 4)


def test_one_tolerance_table_orders_dtypes_by_precision():
    for kind, row in TOLERANCES.items():
        assert len(row) == len(DTYPES)
        assert row[0] < row[1] < row[2], kind  # float32 tightest, bfloat16 loosest
    assert tolerance("matmul", "bfloat16") == TOLERANCES["matmul"][2]
    # the float32 gate (max_rel_error.float32 <= 1%) is far above any float32 tolerance
    assert max(row[0] for row in TOLERANCES.values()) < 0.01


def test_tally_metrics_table_and_markdown(tmp_path):
    from stages._stage import Recorder

    tally = Tally()
    tally.add("matrix", "matrix.mm", "aten::mm", "passed", {"float32": [1e-7, 2e-7], "bfloat16": [4e-3, 5e-3]})
    tally.add("matrix", "matrix.bmm", "aten::bmm", "failed", {"float32": [0.5]})
    tally.add("basic_math", "basic_math.add", "aten::add", "passed")
    rec = Recorder("functional_test", stream=open("/dev/null", "w"))  # noqa: SIM115
    tally.emit(rec)
    assert rec.metrics["op_pass_rate"].value == pytest.approx(2 / 3)
    assert rec.metrics["op_pass_rate.matrix"].value == 0.5
    assert rec.metrics["max_rel_error.float32"].value == 0.5
    assert rec.metrics["max_rel_error.float32"].flat_samples == [1e-7, 2e-7, 0.5]  # one sample per case x seed
    assert rec.metrics["max_rel_error"].value == 0.5
    table = tally.table()
    assert table["matrix"]["failing_ops"] == ["aten::bmm"]
    md = write_markdown(tmp_path / "functional_test.md", {"categories": table, "precision": tally.precision()}, "cpu")
    text = md.read_text()
    assert "| matrix | 2 | 1 | 50.0% | `aten::bmm` |" in text
    assert "| bfloat16 | 2 |" in text


def test_percentile_is_nearest_rank():
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0], 99) == 3.0


def test_a_5x_wider_bfloat16_error_spread_is_detectable_from_the_samples():
    """The samples of max_rel_error.bfloat16 (one per case x seed) carry the distribution a
    baseline comparison needs: the field report's "bf16 error spread 5x wider" stands out."""
    from scipy.stats import mannwhitneyu

    from stages.functional.runner import run_case

    names = ["basic_math.exp", "convolution.conv2d", "reduction.softmax", "matrix.mm.odd", "basic_math.gelu"]
    samples = [e for n in names for e in run_case(n, "cpu", ("bfloat16",), range(6))["details"]["errors"]["bfloat16"]]
    assert len(samples) == 30
    again = [e for n in names for e in run_case(n, "cpu", ("bfloat16",), range(6))["details"]["errors"]["bfloat16"]]
    assert again == samples  # same stack, same seeds: the same distribution, nothing to flag
    wider = [5 * e for e in samples]
    assert mannwhitneyu(wider, samples, alternative="greater").pvalue < 1e-6
