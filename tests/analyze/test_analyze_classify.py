"""Classification of real failure logs (tests/fixtures/logs, labelled in index.jsonl) and synthetic ones."""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

import pytest
import yaml

from gatekeeper.analyze import classify_logs
from gatekeeper.analyze.classify import Classifier
from gatekeeper.analyze.corpus import read_index, score, split_of
from gatekeeper.analyze.diagnosis import diagnose
from gatekeeper.analyze.rules import CATEGORIES, load_rules

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
INDEX = read_index(LOGS / "index.jsonl")
# The done-when of issue 15, on the frozen test split.
MIN_ACCURACY = 0.90
MIN_RECALL = 0.75
MIN_PRECISION = 0.95


@pytest.fixture(scope="module")
def rules():
    return load_rules()


def _classify_text(rules, text: str, *, chunk_bytes: int | None = None):
    kwargs = {"chunk_bytes": chunk_bytes} if chunk_bytes else {}
    clf = Classifier(rules, **kwargs)
    clf.scan(io.BytesIO(text.encode()), "job.log")
    return diagnose(clf.evidence, rules)


@pytest.fixture(scope="module")
def answers(rules):
    """(entry, diagnosis) for every labelled log, rules + the packaged learned model as analyze runs them."""
    return [(e, classify_logs([LOGS / e["file"]], rules=rules)) for e in INDEX]


def _scores(answers, split):
    pairs = [(e["category"], d.category) for e, d in answers if e["split"] == split]
    # the categories the corpus labels or the answers name: performance_regression and configuration_error
    # are gatekeeper's own failures, with no public log labelled so (a wrong answer of them still counts)
    return score(pairs, [c for c in CATEGORIES if c != "unknown" and any(c in pair for pair in pairs)])


def test_train_split_is_near_perfect(answers):
    # Rules and model were written and trained on these logs: anything else is a regression.
    s = _scores(answers, "train")
    wrong = [
        f"{e['file']}: {e['category']} -> {d.category}"
        for e, d in answers
        if e["split"] == "train" and e["category"] != d.category
    ]
    assert s.accuracy >= 0.98, "\n".join(wrong)
    assert s.answered_precision >= 0.98, "\n".join(wrong)
    assert all(c.recall >= 0.85 for c in s.categories), "\n".join(wrong)


def _test_split_table(s):
    return "\n".join(
        f"{c.category:24} recall {c.recall:.2f} precision {c.precision if c.precision is None else round(c.precision, 2)}"
        for c in s.categories
    )


def test_test_split_does_not_regress(answers):
    # Measured once per round, after rules and model were frozen (benchmarks/README.md). Sixth round
    # (664 logs, 204 in the test split, 35 of them new): top-1 0.902 (184/204), precision of non-unknown
    # answers 0.979 (184/188); the fifth round's 169 test logs went from 149 to 154 right, the 35 new
    # ones scored 30. Fifth round, 169 test logs: 0.882 / 0.974; fourth, 134: 0.896 / 0.976; third,
    # 109: 0.86 / 0.98; second, 97: 0.85 / 0.96; first, 74: 0.78 / 0.95. A change that loses held-out
    # logs fails here. Failures name only figures, not files: improve rules on the train split, never
    # on these.
    s = _scores(answers, "test")
    assert s.accuracy >= 0.90, f"top-1 {s.accuracy:.3f}\n{_test_split_table(s)}"
    assert s.answered_precision >= 0.97, f"precision of non-unknown answers {s.answered_precision:.3f}"


def test_test_split_meets_the_done_when_thresholds(answers):
    # Frozen before any signature was tuned; never looked at when writing rules or training.
    s = _scores(answers, "test")
    table = _test_split_table(s)
    assert s.accuracy >= MIN_ACCURACY, f"top-1 {s.accuracy:.3f}\n{table}"
    assert all(c.recall >= MIN_RECALL for c in s.categories), table
    assert s.answered_precision >= MIN_PRECISION, f"precision of non-unknown answers {s.answered_precision:.3f}"


def test_the_split_is_the_frozen_hash_of_the_file_name():
    assert all(e["split"] == split_of(e["file"]) for e in INDEX)
    test = [e for e in INDEX if e["split"] == "test"]
    assert 0.25 <= len(test) / len(INDEX) <= 0.42
    per_cat = {c: sum(e["category"] == c for e in test) for c in {e["category"] for e in INDEX}}
    assert min(per_cat.values()) >= 4, per_cat


def test_every_log_is_in_the_index_once_with_provenance():
    names = [e["file"] for e in INDEX]
    assert len(names) == len(set(names))
    on_disk = {p.name for p in LOGS.iterdir() if p.suffix != ".jsonl"}
    assert on_disk == set(names)
    assert all(e["source"] and e["signature"] for e in INDEX)
    assert sum("url" in e and "date" in e for e in INDEX) >= 256
    assert not list(LOGS.glob("corpus-*.jsonl"))


def _thread(entry) -> tuple[str, str] | None:
    """(owner/repo, number) of the issue or pull request a log comes from, by URL or by source."""
    m = re.search(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull|discussions)/(\d+)", entry.get("url") or "")
    m = m or re.search(r"([\w.-]+/[\w.-]+) (?:issue|pull request|PR|discussion) #(\d+)", entry["source"])
    return (m.group(1).lower(), m.group(2)) if m else None


def test_no_thread_gives_two_logs():
    # Two logs of one thread would put the same failure on both sides of the split (a train copy
    # of a test log); the fifth round found three such pairs that the URLs alone did not show.
    threads: dict[tuple[str, str], str] = {}
    for e in INDEX:
        key = _thread(e)
        if key is not None:
            assert key not in threads, f"{e['file']} and {threads[key]} come from the same thread {key}"
            threads[key] = e["file"]
    assert len(threads) >= 500  # the sources are written so that the check sees almost every log


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


def test_regexes_see_a_long_line_only_at_its_start_its_end_and_after_its_last_carriage_return(rules):
    # A 1.9 MB line repeating "NCCL WARN" once kept analyze busy for more than 10 minutes: the regexes now see
    # MAX_MATCH characters at each end of a line (benchmarks/README.md, "hostile"). The bound is the rule
    # tested here: a signature in the middle of a long line is not seen, one at either end or after the
    # last carriage return (a progress bar's final redraw) is.
    from gatekeeper.analyze.classify import MAX_MATCH

    sig, pad = "RuntimeError: HIP error: invalid device function", "x" * (2 * MAX_MATCH)
    assert _classify_text(rules, f"{pad} {sig} {pad}\n").category == "unknown"
    for line in (f"{sig} {pad}{pad}", f"{pad}{pad} {sig}", f"{pad}\r{pad}\r{sig} {pad}", sig):
        d = _classify_text(rules, line + "\n")
        assert (d.category, d.known_issue) == ("no_binary_for_gpu", "hip-no-binary-for-gpu")
    # preceded_by looks at the lines before through the same bound
    test_line = "[ RUN      ] Suite.Case"
    timeout = "ERROR: Job failed: execution took longer than 1h0m0s seconds\n"
    assert _classify_text(rules, f"{pad}{pad} {test_line}\n{timeout}").category == "gpu_hang_or_timeout"
    assert _classify_text(rules, f"{pad} {test_line} {pad}\n{timeout}").category == "infra_error"


def test_the_input_budget_stops_reading_and_says_what_was_not_read(rules):
    # A gzip bomb or an endless artifact log cannot keep analyze busy: it reads at most max_input_bytes of text
    # over all sources (4 GiB by default) and names each source it did not read to the end.
    from gatekeeper.analyze.render import render

    noise = "".join(f"step {i} ok\n" for i in range(2000)).encode()
    error = b"RuntimeError: HIP error: invalid device function\n"
    clf = Classifier(rules, chunk_bytes=4096, max_input_bytes=len(noise))
    clf.scan(io.BytesIO(noise + error), "job.log")
    clf.scan(io.BytesIO(error), "other.log")
    d = diagnose(clf.evidence, rules)
    assert d.category == "unknown"  # the error lay beyond the budget: not read, so not claimed
    assert [i.get("truncated_after_bytes") for i in d.to_dict()["inputs"]] == [len(noise), 0]
    assert f"not read to the end: job.log: only its first {len(noise):,} bytes were read" in render(d, "text")
    assert "Not read to the end" in render(d, "md")
    # the other budget: characters of candidate lines given to the regexes (crafted lines are slow to match)
    candidates = b"failed, then NCCL WARN\n" * 200  # both literals, never in the order the signature needs
    clf = Classifier(rules, chunk_bytes=1024, max_matched_chars=1000)
    clf.scan(io.BytesIO(candidates + error), "job.log")
    d = diagnose(clf.evidence, rules)
    assert d.category == "unknown"
    assert 0 < d.to_dict()["inputs"][0]["truncated_after_bytes"] < len(candidates)
    # a log that fits the budget exactly is read whole and not reported
    whole = Classifier(rules, chunk_bytes=4096, max_input_bytes=len(noise + error))
    whole.scan(io.BytesIO(noise + error), "job.log")
    d = diagnose(whole.evidence, rules)
    assert d.category == "no_binary_for_gpu"
    assert "truncated_after_bytes" not in d.to_dict()["inputs"][0]


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


# --- families of messages (issue 15): one phrasing per family, written in tests/analyze/families.yaml
FAMILIES = yaml.safe_load((Path(__file__).with_name("families.yaml")).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("text", "category", "rule"),
    [(text, family["category"], rule) for rule, family in FAMILIES.items() for text in family["examples"]],
)
def test_families_of_messages(rules, text, category, rule):
    d = _classify_text(rules, text)
    assert (d.category, d.known_issue) == (category, rule)


@pytest.mark.parametrize(
    "text",
    [
        "NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\nNCCL INFO NET/IB : No device found.\n",
        "MIOpen(HIP): Warning [IsEnoughWorkspace] Solver <GemmFwdRest>, workspace required: 0\n",
        "Process completed with exit code 0.\nexit 13\n",
        "rocBLAS info: using Tensile library for gfx90a\n",
        "step 10 | timeout=300 s | memory 4.1 GiB\n",
        'Uploading artifacts as "archive" to coordinator... 201 Created\n',
        "Artifact report.zip successfully finalized. Artifact ID 6028048653\n",
        "amdgpu_device_initialize: using render node /dev/dri/renderD128\n",
        "pip: connect timeout set to 15 s (PIP_TIMEOUT); retries 5\n",
        "Killed 3 stale containers; virtual memory 12 GiB free\n",
        "note: execution took longer than expected (12 s), consider --jobs 4\n",
        "HSA_STATUS_ERROR_INVALID_ISAS_TOTAL=0\n",
        "check done. Number of mismatched elements: 0\n",
        # fourth round: the enumeration families stay quiet on what healthy runs print
        "runtime error: load of misaligned address 0x7ffd for type 'int', which requires 4 byte alignment\n",
        "MIOpen(HIP): Info [FindSolution] /src/MIOpen/src/solver.cpp:12: searching\n",
        "MIOpen(HIP): Warning [IsEnoughWorkspace] /opt/MIOpen/src/conv/solver.cpp:88: workspace required: 0\n",
        "exitcode: 0 (pid: 4242)\nexit code: -90\n",
        "NCCL INFO Channel 00/02 : 0[0] -> 1[1] via P2P/IPC\nncclSuccess\n",
        "step 3: 1.25 is close to 1.25 (ok)\n",
        "kernel launches: 1200, launch failures: 0\n",
        "LLVM ERRORS: none\n",
        "curl: (22) The requested URL returned error: 404 Not Found\n",
        "HTTP 200 OK; gateway timeout set to 60 s\n",
        "allocator: allocated 3.5G (3758096384 bytes) from device 0\n",
        "buildkite-agent: agent lost heartbeat once, reconnected\n",
        "Preparation failed: 0, retries: 0\n",
        "HTTP Error 404: Not Found (optional mirror skipped)\n",
        "note: the 'tt.dot' op is lowered to MFMA on gfx942\n",
        "gtest_main.cpp(12): note: Running main() from gtest_main.cc\n",
        "rocblas_status_success\nHIPBLAS_STATUS_SUCCESS\nmiopenStatusSuccess\n",
        "Retrying connection to the store (attempt 1 of 30)\n",
        "HSA_STATUS_ERROR_NOT_INITIALIZED_COUNT=0\n",
        # fifth round
        "Get:12 http://archive.ubuntu.com/ubuntu jammy/main amd64 cpp-12 amd64 12.3.0-1 [10.8 MB]\nFetched 50 MB in 3s\n",
        "NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.2<0>\n",
        "node1:77:77 [0] NCCL INFO NET/Plugin: Failed to find ncclCollNetPlugin_v6 symbol.\n",
        "\tlibamdhip64.so.6 => /opt/rocm/lib/libamdhip64.so.6 (0x00007f1c)\n",
        "signal handler registered; waiting on signal SIGTERM\n",
        "assert 1.0 != 2.0 checks passed\n",
        "P2P peer access enabled between GPU0 and GPU1\n",
        "hipcc: found at /opt/rocm/bin/hipcc\n",
        # sixth round
        "ninja: no work to do.\n[1/4] Building CXX object src/CMakeFiles/k.dir/k.cpp.o\n",
        "nvcc warning : The 'compute_60' architecture is deprecated\n",
        "NVML initialised: driver 550.54, 8 devices\n",
        "Waiting for a runner matching the specified labels: self-hosted, gpu\n",
        "MIOpen(HIP)  12.5: Info [BuildHip] comgr status = SUCCESS\n",
        "hipError_t(0) hipSuccess\n",
    ],
)
def test_family_patterns_do_not_fire_on_harmless_lines(rules, text):
    assert _classify_text(rules, text).category == "unknown"


def test_a_warning_signature_loses_to_a_later_error(rules):
    warn = "MIOpen(HIP): Warning [SQLiteBase] Missing system database file: gfx1031_20.kdb Performance may degrade.\n"
    assert _classify_text(rules, warn).category == "miopen_error"
    # The segfault signature ranks below the MIOpen warning (30 < 35): only the order decides.
    later = _classify_text(rules, warn + "step 3\nSegmentation fault (core dumped)\n")
    assert later.category == "segfault"
    assert {s["rule"] for s in later.also_seen} == {"miopen-database-warning"}
    # Noise after the crash does not supersede it either way: the warning is the last line here.
    before = _classify_text(rules, "Segmentation fault (core dumped)\n" + warn)
    assert before.category == "miopen_error"


def test_a_non_warning_signature_is_not_demoted_by_later_lines(rules):
    log = "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!\nSegmentation fault\n"
    assert _classify_text(rules, log).category == "no_binary_for_gpu"
