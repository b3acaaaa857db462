"""gatekeeper.history.points: each record's metric summary, and the columns history changes reads from
summaries and points alike."""

from __future__ import annotations

import numpy as np
import pytest

from gatekeeper.history.points import decode_levels, encode_levels, metric_columns
from gatekeeper.stats.changepoint import median_table


def test_a_summary_reads_back_as_the_levels_of_its_points() -> None:
    points = {"latency_ms": [10.0, 10.2, 9.9, 10.1], "memory_gb": [3.5]}
    names, data = encode_levels(points) or ("", b"")
    levels = decode_levels(names, data, {})
    assert levels is not None
    assert levels.names == ("latency_ms", "memory_gb")
    x, within, _ = median_table([points["latency_ms"]])
    assert levels.table[0, 0] == 4
    assert levels.table[0, 1] == pytest.approx(x[0])
    assert levels.table[0, 2] / 4 == pytest.approx(within[0])
    assert list(levels.table[1]) == [1.0, pytest.approx(np.log(3.5)), 0.0]
    assert encode_levels({}) is None


@pytest.mark.parametrize(
    ("names", "data"),
    [
        ('["a"]', b"\x00" * 23),  # too short
        ('["a", "a"]', np.asarray([[2, 1.0, 0.1]] * 2).tobytes()),  # a name twice
        ('{"a": 1}', np.asarray([[2, 1.0, 0.1]]).tobytes()),  # not a list of names
        ("not json", np.asarray([[2, 1.0, 0.1]]).tobytes()),
        ('["a"]', np.asarray([[0, 1.0, 0.1]]).tobytes()),  # no process
        ('["a"]', np.asarray([[2.5, 1.0, 0.1]]).tobytes()),  # half a process
        ('["a"]', np.asarray([[2, np.nan, 0.1]]).tobytes()),
        ('["a"]', np.asarray([[2, 1.0, -0.1]]).tobytes()),  # a negative variance
        ('["a"]', "text"),
        ("[" * 5000 + "]" * 5000, np.asarray([[2, 1.0, 0.1]]).tobytes()),  # was exit 70 (RecursionError)
    ],
)
def test_a_summary_that_is_not_one_is_not_read(names: str, data: object) -> None:
    assert decode_levels(names, data, {}) is None


def test_columns_from_summaries_and_points_are_the_same_and_keep_the_run_order() -> None:
    rng = np.random.default_rng(1)
    points = [{"m": list(rng.uniform(9, 11, 10)), "n": [float(i + 1)]} for i in range(8)]
    summaries = []
    for p in points:
        names, data = encode_levels(p) or ("", b"")
        summaries.append(decode_levels(names, data, {}))
    mixed = [(p, s if i % 3 else None) for i, (p, s) in enumerate(zip(points, summaries, strict=True))]
    a = metric_columns([(p, None) for p in points])
    b = metric_columns(mixed)
    for name in ("m", "n"):
        assert list(a[name].rows) == list(b[name].rows) == list(range(8))
        assert np.allclose(a[name].levels, b[name].levels)
        assert np.allclose(a[name].within, b[name].within)
        assert list(a[name].counts) == list(b[name].counts)
    assert list(metric_columns(mixed, only="n")) == ["n"]


def test_a_record_with_a_number_that_is_not_a_level_is_left_out_of_that_metric() -> None:
    rows = [
        ({"m": [10.0, 10.1]}, None),
        ({"m": [10.0, -1.0]}, None),  # a damaged row: not a positive number
        ({"m": [10.0, "x"]}, None),
        ({"m": [10.0, None]}, None),
        ({"m": []}, None),
        ({"m": [10.2, 10.3], "k": [1.0]}, None),
    ]
    got = metric_columns(rows)
    assert list(got["m"].rows) == [0, 5]
    assert list(got["k"].rows) == [5]


def test_a_number_the_bounded_reader_refuses_leaves_its_row_out_and_is_never_a_crash() -> None:
    # issue 23 matrix (history changes, a store whose points hold a 400-digit integer): a float cannot hold it
    # (OverflowError, exit 70 before); 1e300 is a float, but outside the range every reader accepts
    rows = [
        ({"m": [10.0, 10.1]}, None),
        ({"m": [10**400, 10.0]}, None),
        ({"m": [1e300, 10.0]}, None),
        ({"m": [10.2, 10.3]}, None),
    ]
    got = metric_columns(rows)
    assert list(got["m"].rows) == [0, 3]


@pytest.mark.parametrize(
    "text", ["[" * 5000 + "]" * 5000, '{"torch": "2.5", "torch": "2.6"}', b"\xff\xfe", 5, '{"a": 1' + "0" * 400 + "}"]
)
def test_a_stored_json_column_the_strict_reader_refuses_is_empty_never_a_crash(text: object) -> None:
    from gatekeeper.history.sql_schema import json_dict

    assert json_dict(text) == {}
    assert json_dict('{"torch": "2.5"}') == {"torch": "2.5"}
