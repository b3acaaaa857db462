"""Classification of real failure logs (tests/fixtures/logs, labelled in index.jsonl) and synthetic ones."""

from __future__ import annotations

import gzip
import io
import json
from collections import defaultdict
from pathlib import Path

import pytest

from gatekeeper.analyze import classify_logs
from gatekeeper.analyze.classify import Classifier
from gatekeeper.analyze.diagnosis import diagnose
from gatekeeper.analyze.rules import CATEGORIES, load_rules

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
INDEX = [json.loads(line) for line in (LOGS / "index.jsonl").read_text().splitlines() if line.strip()]
MIN_ACCURACY = 0.9


@pytest.fixture(scope="module")
def rules():
    return load_rules()


def _classify_text(rules, text: str, *, chunk_bytes: int | None = None):
    kwargs = {"chunk_bytes": chunk_bytes} if chunk_bytes else {}
    clf = Classifier(rules, **kwargs)
    clf.scan(io.BytesIO(text.encode()), "job.log")
    return diagnose(clf.evidence, rules)


def test_fixture_accuracy_overall_and_per_category(rules):
    per_cat: dict[str, list[bool]] = defaultdict(list)
    wrong = []
    for entry in INDEX:
        got = classify_logs([LOGS / entry["file"]], rules=rules).category
        per_cat[entry["category"]].append(got == entry["category"])
        if got != entry["category"]:
            wrong.append(f"{entry['file']}: expected {entry['category']}, got {got}")
    table = "\n".join(f"{cat:24} {sum(v)}/{len(v)}" for cat, v in sorted(per_cat.items()))
    print("\nper-category accuracy on tests/fixtures/logs:\n" + table)
    total = sum(sum(v) for v in per_cat.values()) / sum(len(v) for v in per_cat.values())
    assert total >= MIN_ACCURACY, "\n".join(wrong)
    assert all(sum(v) / len(v) >= 0.5 for v in per_cat.values()), table


def test_index_categories_are_taxonomy_ids():
    assert {e["category"] for e in INDEX} <= set(CATEGORIES)


def test_root_cause_beats_its_consequence(rules):
    log = (
        "loading model\n"
        "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!\n"
        "Segmentation fault (core dumped)\n"
    )
    d = _classify_text(rules, log)
    assert d.category == "no_binary_for_gpu"
    assert d.known_issue == "hip-no-binary-for-gpu"
    assert d.matches[0].line == 2
    assert {s["category"] for s in d.also_seen} == {"segfault"}


def test_gpu_hang_beats_the_collective_timeouts_it_causes(rules):
    log = (
        "[rank1]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 6e5 ms\n"
        "HW Exception by GPU node-2 (Agent handle: 0x1234) reason :GPU Hang\n"
    )
    assert _classify_text(rules, log).category == "gpu_hang_or_timeout"


@pytest.mark.parametrize(
    ("text", "category"),
    [
        # OOM in phrasings that are not in the fixtures
        ("RuntimeError: HIP error: out of memory\n", "device_oom"),
        ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n", "device_oom"),
        ("hipMalloc(&ptr, 1073741824) failed: out of memory\n", "device_oom"),
        # infrastructure
        ("Running tests\nERROR: Job failed: execution took longer than 1h0m0s seconds\n", "infra_error"),
        ("OSError: [Errno 28] No space left on device: '/tmp/torchinductor_ci'\n", "infra_error"),
        ("ERROR: Job failed (system failure): prepare environment: exit code 1\n", "infra_error"),
        (
            "Retrying... fatal: unable to access 'https://gitlab.example.com/x.git/': Could not resolve host\n",
            "infra_error",
        ),
        # others in their own words
        ("RuntimeError: HIP error: an illegal memory access was encountered\n", "illegal_memory_access"),
        ("RuntimeError: No HIP GPUs are available\n", "device_not_available"),
        (
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited\n",
            "collective_comm_error",
        ),
        ("Fatal Python error: Segmentation fault\n", "segfault"),
        (
            "ImportError: libamdhip64.so.6: cannot open shared object file: No such file or directory\n",
            "library_mismatch",
        ),
        ("ninja: build stopped: subcommand failed.\n", "compile_error"),
        ("AssertionError: Scalars are not close!\n", "numerical_mismatch"),
        ("epoch 3 | train loss: nan | lr 1e-4\n", "numerical_mismatch"),
        ("MIOpen Error: /long/pathname/so/that/we/get/it/out/of/the/build.cpp:1234: Invalid tensor\n", "miopen_error"),
    ],
)
def test_generalises_beyond_the_fixtures(rules, text, category):
    assert _classify_text(rules, text).category == category


def test_ci_timeout_while_a_test_runs_is_a_hang_not_infra(rules):
    log = "[ RUN      ] Conv.Backward\nERROR: Job failed: execution took longer than 3h0m0s seconds\n"
    d = _classify_text(rules, log)
    assert d.category == "gpu_hang_or_timeout"
    assert d.known_issue == "ci-timeout-while-test-running"


@pytest.mark.parametrize(
    "text",
    [
        "collecting ... collected 12 items\ntest_a.py::test_x PASSED\n12 passed in 3.2s\n",
        "Downloading torch-2.5.0-cp311.whl (800 MB)\nSuccessfully installed torch\n",
        "the quick brown fox jumps over the lazy dog\n" * 50,
        "loss 0.25 | norm 1.3 | nan_count 0 | infinite loop guard ok\n",
    ],
)
def test_clean_or_harmless_logs_are_unknown_with_zero_confidence(rules, text):
    d = _classify_text(rules, text)
    assert d.category == "unknown"
    assert d.known_issue is None
    assert d.confidence == 0.0


def test_unrecognised_failure_is_unknown_but_keeps_the_evidence(rules):
    d = _classify_text(rules, "step 1\nTraceback (most recent call last):\nValueError: frobnicator exploded\n")
    assert d.category == "unknown"
    assert d.known_issue is None
    assert [m.line for m in d.matches] == [2, 3]


def test_line_numbers_context_and_ansi_are_right_across_chunk_boundaries(rules):
    noise = "".join(f"\x1b[32mINFO\x1b[0m step {i} ok\n" for i in range(5000))
    log = noise + "\x1b[31mRuntimeError: HIP error: invalid device function\x1b[0m\n" + noise
    small = _classify_text(rules, log, chunk_bytes=4096)
    big = _classify_text(rules, log)
    for d in (small, big):
        assert d.category == "no_binary_for_gpu"
        m = d.matches[0]
        assert m.line == 5001
        assert m.text == "RuntimeError: HIP error: invalid device function"
        assert m.before == ("INFO step 4998 ok", "INFO step 4999 ok")
        assert m.after == ("INFO step 0 ok", "INFO step 1 ok")
    assert small.sources == big.sources == {"job.log": 10001}


def test_reads_gzip_and_several_files(rules, tmp_path):
    gz = tmp_path / "job.log.gz"
    gz.write_bytes(gzip.compress((LOGS / "device_oom__strix-halo-toolboxes-3.log").read_bytes()))
    d = classify_logs([gz, LOGS / "segfault__therock-2850-gfx1151.log"], rules=rules)
    assert d.category == "device_oom"  # the OOM outranks the other file's segfault
    assert d.matches[0].source == str(gz)
    assert set(d.sources) == {str(gz), str(LOGS / "segfault__therock-2850-gfx1151.log")}


def test_truncated_gzip_is_an_input_error(rules, tmp_path):
    from gatekeeper.core.errors import InputError

    gz = tmp_path / "job.log.gz"
    gz.write_bytes(gzip.compress(b"x" * 100000)[:50])
    with pytest.raises(InputError, match="gzip"):
        classify_logs([gz], rules=rules)


def test_matches_are_capped_per_rule(rules):
    d = _classify_text(rules, "Segmentation fault\n" * 1000)
    assert len(d.matches) == 5
    assert d.category == "segfault"


def test_fallback_without_aho_corasick_finds_the_same(rules):
    log = (LOGS / "gpu_hang_or_timeout__rocm-5259-gfx942.log").read_text() * 3
    with_ac = Classifier(rules)
    plain = Classifier(rules, chunk_bytes=1000)
    plain._automaton = None  # the bytes.find path used when ahocorasick-rs is missing
    for clf in (with_ac, plain):
        clf.scan(io.BytesIO(log.encode()), "job.log")
    assert with_ac._automaton is not None
    assert with_ac.evidence.counts == plain.evidence.counts
    assert [m.line for m in with_ac.evidence.matches["gpu-hang"]] == [
        m.line for m in plain.evidence.matches["gpu-hang"]
    ]
