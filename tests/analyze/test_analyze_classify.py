"""Classification of real failure logs (tests/fixtures/logs, labelled in index.jsonl) and synthetic ones."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

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
    return score(pairs, [c for c in CATEGORIES if c != "unknown"])


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
    # Measured once per round, after rules and model were frozen (benchmarks/README.md). Fourth round
    # (449 logs, 134 in the test split): top-1 0.896 (120/134), precision of non-unknown answers 0.976
    # (120/123); third round, 109 test logs: 0.86 / 0.98; second, 97: 0.85 / 0.96; first, 74: 0.78 /
    # 0.95. A change that loses held-out logs fails here. Failures name only figures, not files:
    # improve rules on the train split, never on these.
    s = _scores(answers, "test")
    assert s.accuracy >= 0.89, f"top-1 {s.accuracy:.3f}\n{_test_split_table(s)}"
    assert s.answered_precision >= 0.97, f"precision of non-unknown answers {s.answered_precision:.3f}"


@pytest.mark.xfail(
    strict=True,
    reason="issue 15 done-when not met on the frozen test split (fourth round, 134 logs: top-1 0.896, one log "
    "short of 0.90): see benchmarks/README.md. Strict: remove this marker when it passes.",
)
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


# --- families of messages (issue 15): one phrasing per family, written here, not copied from a fixture
@pytest.mark.parametrize(
    ("text", "category", "rule"),
    [
        # OOM as other frameworks word it
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 1024 bytes.\n",
            "device_oom",
            "device-out-of-memory",
        ),
        (
            "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[8,3]\n",
            "device_oom",
            "device-out-of-memory",
        ),
        (
            "E rocm_driver.cc:600] failed to allocate 2.0GiB from device: HIP_ERROR_OutOfMemory\n",
            "device_oom",
            "device-out-of-memory",
        ),
        (
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 10 MiB on device 1: cudaMalloc failed: out of memory\n",
            "device_oom",
            "device-out-of-memory",
        ),
        (
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`\n",
            "device_oom",
            "device-out-of-memory",
        ),
        (":1:rocdevice.cpp :2300: Video memory allocation failed!\n", "device_oom", "device-out-of-memory"),
        (
            "onnxruntime: Failed to allocate memory for requested buffer of size 4096\n",
            "device_oom",
            "device-out-of-memory",
        ),
        # missing code objects for an arch
        (
            "RuntimeError: HIP error: shared object initialization failed\n",
            "no_binary_for_gpu",
            "code-object-load-failed",
        ),
        (
            "rocBLAS error: Could not load /opt/rocm/lib/rocblas/library/TensileLibrary_lazy_gfx1036.dat\n",
            "no_binary_for_gpu",
            "rocblas-tensile-no-kernels",
        ),
        (
            'rocBLAS error: No Tensile solution found for { a_type: "bf16_r" }\n',
            "no_binary_for_gpu",
            "rocblas-tensile-no-kernels",
        ),
        (
            "Error: The program ISA amdgcn-amd-amdhsa--gfx90a is not compatible with the device ISA amdgcn-amd-amdhsa--gfx1100\n",
            "no_binary_for_gpu",
            "hip-no-binary-for-gpu",
        ),
        (
            "ggml_cuda_compute_forward: ROCm error: device kernel image is invalid\n",
            "no_binary_for_gpu",
            "hip-no-binary-for-gpu",
        ),
        # device initialisation
        (
            "E rocm_driver.cc:200] failed call to hipInit: HIP_ERROR_NoDevice\n",
            "device_not_available",
            "device-not-visible",
        ),
        (":1:rocdevice.cpp :470 : hsa_init failed with 4104\n", "device_not_available", "device-not-visible"),
        (
            "[    3.1] amdgpu 0000:03:00.0: amdgpu: probe of 0000:03:00.0 failed with error -22\n",
            "device_not_available",
            "device-not-visible",
        ),
        ("RuntimeError: no CUDA-capable device is detected\n", "device_not_available", "device-not-visible"),
        # hangs reported by harnesses
        ("Error: The action 'Run tests' has timed out after 120 minutes.\n", "gpu_hang_or_timeout", "test-timeout"),
        ("12/40 Test #12: rocfft.small_2d .........***Timeout 1500.02 sec\n", "gpu_hang_or_timeout", "test-timeout"),
        (
            "subprocess.TimeoutExpired: Command '['./bench']' timed out after 600 seconds\n",
            "gpu_hang_or_timeout",
            "test-timeout",
        ),
        ("Timeout (0:10:00)!\n", "gpu_hang_or_timeout", "test-timeout"),
        (
            "#2  0x00007f in rocr::core::InterruptSignal::WaitRelaxed(...) () from libhsa-runtime64.so\n",
            "gpu_hang_or_timeout",
            "blocked-in-gpu-wait",
        ),
        # device faults
        (
            "amdgpu 0000:0c:00.0: amdgpu: [mmhub1] retry page fault (src_id:0 ring:0 vmid:4)\n",
            "illegal_memory_access",
            "gpu-memory-access-fault",
        ),
        (
            "Loss.hip:240: nll_loss_forward: Device-side assertion `t >= 0 && t < n_classes' failed.\n",
            "illegal_memory_access",
            "device-side-assert",
        ),
        # MIOpen kernel loads
        (
            "MIOpen(HIP): Error [x] hipoc_program.cpp:300: Failed creating module from file /tmp/miopen-k/x.o\n",
            "miopen_error",
            "miopen-kernel-load",
        ),
        # multi-node collectives
        (
            "node3:77:90 [1] transport/net_ib.cc:700 NCCL WARN NET/IB : Got completion with error 12, opcode 0\n",
            "collective_comm_error",
            "collective-failure",
        ),
        (
            "RuntimeError: ... store->get('0') got error: Connection reset by peer\n",
            "collective_comm_error",
            "collective-failure",
        ),
        # library loading and versions
        (
            "OSError: libMIOpen.so.1: cannot open shared object file: No such file or directory (while loading plugin)\n",
            "library_mismatch",
            "shared-library-missing",
        ),
        (
            "ImportError: DLL load failed while importing _C: The specified module could not be found.\n",
            "library_mismatch",
            "shared-library-missing",
        ),
        (
            "RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA major versions.\n",
            "library_mismatch",
            "shared-library-missing",
        ),
        # compiler and code generation
        ("clang++: error: unsupported option '--offload-arch=gfx9999'\n", "compile_error", "compiler-diagnostic"),
        (
            "kernel.hip:12:5: error: no matching function for call to 'atomicAdd'\n",
            "compile_error",
            "compiler-diagnostic",
        ),
        ('src/op.cu(45): error: identifier "__shfl_sync" is undefined\n', "compile_error", "compiler-diagnostic"),
        ("LLVM ERROR: Cannot select: intrinsic %llvm.amdgcn.mfma\n", "compile_error", "compiler-diagnostic"),
        ("torch._inductor.exc.CppCompileError: C++ compile error\n", "compile_error", "compiler-diagnostic"),
        (
            "ld.lld: error: undefined symbol: hipLaunchKernel\n",
            "compile_error",
            "link-error",
        ),  # a link error, not a mismatch
        # numerical mismatches from library self-tests
        (
            "The difference between hA[j] and hB[j] is 0.5, which exceeds 1e-3, where\n",
            "numerical_mismatch",
            "tensors-not-close",
        ),
        ("Mismatch at 17: 3.25 != 3.5\n", "numerical_mismatch", "tensors-not-close"),
        ("Backward Convolution Data FAILED: 0.25 > 1e-06\n", "numerical_mismatch", "tensors-not-close"),
        ("AssertionError: \nArrays are not almost equal to 6 decimals\n", "numerical_mismatch", "tensors-not-close"),
        (
            "test/gemm.cpp:88: Failure\nExpected equality of these values:\n  ref\n",
            "numerical_mismatch",
            "self-test-equality",
        ),
        # native crashes in other words
        ("==77==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000010\n", "segfault", "segmentation-fault"),
        ("trainer-1 exited with code 139\n", "segfault", "segmentation-fault"),
        ("Windows fatal exception: access violation\n", "segfault", "segmentation-fault"),
        ("Illegal instruction (core dumped)\n", "segfault", "segmentation-fault"),
        ("munmap_chunk(): invalid pointer\n", "segfault", "native-abort"),
        # infrastructure
        (
            "The self-hosted runner: gpu-7 lost communication with the server. Verify the machine is running.\n",
            "infra_error",
            "runner-system-failure",
        ),
        ("##[error]Process completed with exit code 137.\n", "infra_error", "host-oom-killed"),
        (
            "RuntimeError: DataLoader worker (pid 12) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory.\n",
            "infra_error",
            "shared-memory-exhausted",
        ),
        (
            "docker: error pulling image configuration: net/http: TLS handshake timeout.\n",
            "infra_error",
            "runner-system-failure",
        ),
        # issue 15, second round: the families the grown corpus showed (phrasings written here)
        (
            "Error response from daemon: manifest for rocm/pytorch:nightly not found\n",
            "infra_error",
            "runner-system-failure",
        ),
        ("c++: fatal error: Killed signal terminated program cc1plus\n", "infra_error", "host-oom-killed"),
        ("virtual memory exhausted: Cannot allocate memory\n", "infra_error", "host-oom-killed"),
        ("Last State: Terminated, Reason: OOMKilled\n", "infra_error", "host-oom-killed"),
        (
            "WARNING: Retrying (Retry(total=1)) after connection broken by 'NewConnectionError(...)': /simple/numpy/\n",
            "infra_error",
            "network-unreachable",
        ),
        ("curl: (28) Operation timed out after 30001 milliseconds\n", "infra_error", "network-unreachable"),
        ("npm ERR! errno ETIMEDOUT\n", "infra_error", "network-unreachable"),
        (
            "ERROR: HTTP error 503 while getting https://example.org/whl/torch.whl\n",
            "infra_error",
            "network-unreachable",
        ),
        (
            "The job running on agent gpu-3 ran longer than the maximum time of 60 minutes.\n",
            "infra_error",
            "ci-job-timeout",
        ),
        ("Too long with no output (exceeded 10m0s): context deadline exceeded\n", "infra_error", "ci-job-timeout"),
        (
            "No output has been received in the last 10m0s, this potentially indicates a stalled build\n",
            "infra_error",
            "ci-job-timeout",
        ),
        ("Cancelling nested steps due to timeout\n", "infra_error", "ci-job-timeout"),
        ("Error: Failed to CreateArtifact: Unable to make request\n", "infra_error", "ci-artifact-transfer-failed"),
        (
            'ERROR: Uploading artifacts as "archive" to coordinator... too large archive\n',
            "infra_error",
            "ci-artifact-transfer-failed",
        ),
        (
            "amdgpu_device_initialize: amdgpu_query_info(ACCEL_WORKING) failed (-13)\n",
            "device_not_available",
            "device-not-visible",
        ),
        ("hsa api call failure at: /src/rocminfo/rocminfo.cc:1200\n", "device_not_available", "device-not-visible"),
        (
            "ERROR:root:Driver not initialized (amdgpu not found in modules)\n",
            "device_not_available",
            "device-not-visible",
        ),
        (
            'docker: Error response from daemon: error gathering device information while adding custom device "/dev/dri/renderD128": not a device node.\n',
            "device_not_available",
            "device-not-visible",
        ),
        (
            'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].\n',
            "device_not_available",
            "device-not-visible",
        ),
        (
            "kernel: python[811]: segfault at 8 ip 00007f00aa11 sp 00007ffd0c20 error 4 in libhsa-runtime64.so\n",
            "segfault",
            "segmentation-fault",
        ),
        # CI time limit as GitLab words it, with or without the ERROR: prefix, any duration
        ("Job failed: execution took longer than 30m0s seconds\n", "infra_error", "ci-job-timeout"),
        ("ERROR: Job failed: execution took longer than 2h0m0s seconds\n", "infra_error", "ci-job-timeout"),
        # no code object for the agent's ISA as the HSA runtime and older HCC word it
        (
            "### HCC STATUS_CHECK Error: HSA_STATUS_ERROR_INVALID_ISA_NAME (0x1017) at mcwamp_hsa.cpp line:99\n",
            "no_binary_for_gpu",
            "hip-no-binary-for-gpu",
        ),
        ("error: HSA_ERROR_INVALID_ISA while loading the kernel\n", "no_binary_for_gpu", "hip-no-binary-for-gpu"),
        # element mismatches as custom kernel test helpers word them
        ("AssertionError: Number of mismatched elements: 12\n", "numerical_mismatch", "tensors-not-close"),
        (
            "Mismatch at index (3, 7): out[(3, 7)] = 1.5, ref[(3, 7)] = 1.25\n",
            "numerical_mismatch",
            "tensors-not-close",
        ),
        # a Tensile library path with spaces (Windows HIP SDK)
        (
            "rocBLAS error: Cannot read D:\\Program Files\\AMD\\ROCm\\6.2\\bin\\rocblas\\library\\TensileLibrary.dat: No such file\n",
            "no_binary_for_gpu",
            "rocblas-tensile-no-kernels",
        ),
        # issue 15, fourth round: the runtimes' and libraries' own error enumerations (hipError_t and
        # hipGetErrorString, cudaError_t/CUresult, hsa_status_t, ncclResult_t and ncclGetErrorString,
        # rocBLAS/hipBLAS/cuBLAS/cuDNN status codes, miopenStatus_t), one line per family
        ("RuntimeError: CUDA error: misaligned address\n", "illegal_memory_access", "gpu-memory-access-fault"),
        ("hipMemcpy failed: hipErrorIllegalAddress (700)\n", "illegal_memory_access", "gpu-memory-access-fault"),
        (
            "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered\n",
            "illegal_memory_access",
            "gpu-memory-access-fault",
        ),
        (
            "error: operation not supported on global/shared address space\n",
            "illegal_memory_access",
            "gpu-memory-access-fault",
        ),
        (
            "HSA_STATUS_ERROR_MEMORY_FAULT: The agent attempted to access an inaccessible address. code: 0x2b\n",
            "illegal_memory_access",
            "gpu-memory-access-fault",
        ),
        (
            "[ 412.3] amdgpu 0000:c3:00.0: amdgpu:   VM_L2_PROTECTION_FAULT_STATUS:0x00301030\n",
            "illegal_memory_access",
            "gpu-memory-access-fault",
        ),
        ("kernel launch failed: cudaErrorAssert\n", "illegal_memory_access", "device-side-assert"),
        ("RuntimeError: CUDA error: unspecified launch failure\n", "illegal_memory_access", "kernel-exception"),
        ("hipDeviceSynchronize: hipErrorLaunchFailure\n", "illegal_memory_access", "kernel-exception"),
        (
            "RuntimeError: CUDA error: the launch timed out and was terminated\n",
            "gpu_hang_or_timeout",
            "gpu-hang",
        ),
        ("cuCtxSynchronize returned CUDA_ERROR_LAUNCH_TIMEOUT\n", "gpu_hang_or_timeout", "gpu-hang"),
        (
            "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable\n",
            "device_not_available",
            "device-not-visible",
        ),
        ("hipSetDevice: hipErrorContextAlreadyInUse\n", "device_not_available", "device-not-visible"),
        ("RuntimeError: CUDA error: initialization error\n", "device_not_available", "device-not-visible"),
        ("cuInit returned CUDA_ERROR_NOT_INITIALIZED\n", "device_not_available", "device-not-visible"),
        ("RuntimeError: CUDA error: system not yet initialized\n", "device_not_available", "device-not-visible"),
        ("hsa_queue_create: HSA_STATUS_ERROR_NOT_INITIALIZED\n", "device_not_available", "device-not-visible"),
        ("hipGetDeviceCount: hipErrorNotInitialized\n", "device_not_available", "device-not-visible"),
        (
            "RuntimeError: CUDA error: forward compatibility was attempted on non supported HW\n",
            "library_mismatch",
            "driver-runtime-mismatch",
        ),
        (
            "hipInit: driver version is insufficient for runtime version\n",
            "library_mismatch",
            "driver-runtime-mismatch",
        ),
        (
            "CUDA error: system has unsupported display driver / cuda driver combination\n",
            "library_mismatch",
            "driver-runtime-mismatch",
        ),
        ("cuInit: CUDA_ERROR_STUB_LIBRARY\n", "library_mismatch", "driver-runtime-mismatch"),
        ("cudaMallocAsync: API call requires a newer CUDA driver\n", "library_mismatch", "driver-runtime-mismatch"),
        (
            "CUDA error: MPS client failed to connect to the MPS control daemon or the MPS server\n",
            "device_not_available",
            "device-not-visible",
        ),
        (
            "CUDA error: the provided PTX was compiled with an unsupported toolchain.\n",
            "library_mismatch",
            "driver-runtime-mismatch",
        ),
        ("cuModuleLoad: CUDA_ERROR_INVALID_IMAGE\n", "no_binary_for_gpu", "hip-no-binary-for-gpu"),
        ("rocblas_gemm_ex returned rocblas_status_arch_mismatch\n", "no_binary_for_gpu", "hip-no-binary-for-gpu"),
        ("hipblasLtMatmul: HIPBLAS_STATUS_ARCH_MISMATCH\n", "no_binary_for_gpu", "hip-no-binary-for-gpu"),
        (
            "cudaErrorSharedObjectInitFailed while loading the fatbin\n",
            "no_binary_for_gpu",
            "code-object-load-failed",
        ),
        ("hipMalloc: hipErrorMemoryAllocation\n", "device_oom", "device-out-of-memory"),
        ("ggml_backend_alloc: failed to allocate CUDA1 buffer of size 2048\n", "device_oom", "device-out-of-memory"),
        (
            "E rocm_driver.cc:600] failed to allocate 3.5G (3758096384 bytes) from device: hipError_t(2)\n",
            "device_oom",
            "device-out-of-memory",
        ),
        (
            "MIOpen Error: /src/hip/handlehip.cpp:70: Memory not available to allocate buffer: 1024\n",
            "device_oom",
            "device-out-of-memory",
        ),
        ("rocblas_create_handle: rocblas_status_memory_error\n", "device_oom", "device-out-of-memory"),
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n",
            "device_oom",
            "device-out-of-memory",
        ),
        ("hipfftPlan1d failed: HIPFFT_ALLOC_FAILED\n", "device_oom", "device-out-of-memory"),
        ("miopenFindConvolutionForwardAlgorithm: miopenStatusUnsupportedOp\n", "miopen_error", "miopen-error"),
        (
            "MIOpen: Error [FindSolution] /src/conv/solver.cpp:12: no solver for this problem\n",
            "miopen_error",
            "miopen-error",
        ),
        (
            "terminate: /opt/build/MIOpen/src/ocl/batchnormocl.cpp:210: Batch norm cannot run with these params\n",
            "miopen_error",
            "miopen-error",
        ),
        (
            "ncclCommInitRank: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n",
            "collective_comm_error",
            "collective-failure",
        ),
        (
            "ncclAllReduce: internal error - please report this issue to the NCCL developers\n",
            "collective_comm_error",
            "collective-failure",
        ),
        (
            "ncclGroupEnd: invalid usage (run with NCCL_DEBUG=WARN for details)\n",
            "collective_comm_error",
            "collective-failure",
        ),
        (
            "ncclSend: remote process exited or there was a network error\n",
            "collective_comm_error",
            "collective-failure",
        ),
        ("RCCL failure src/all_gather.cc:51 'invalid argument'\n", "collective_comm_error", "collective-failure"),
        (
            "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n",
            "collective_comm_error",
            "collective-failure",
        ),
        (
            "transport/shm.cc:90 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9 bytes: No space left on device\n",
            "collective_comm_error",
            "collective-failure",
        ),
        ("  what():  LLVM ERROR: Cannot select: t12: i32 = AMDGPUISD::X\n", "compile_error", "compiler-diagnostic"),
        (
            "PLEASE submit a bug report to https://bugs.llvm.org/ and include the crash backtrace, preprocessed source.\n",
            "compile_error",
            "compiler-diagnostic",
        ),
        (
            "opt: /build/llvm/lib/CodeGen/RegAllocFast.cpp:900: void X(): Assertion `Reg' failed.\n",
            "compile_error",
            "compiler-diagnostic",
        ),
        (
            "UNREACHABLE executed at /src/llvm/lib/Target/AMDGPU/SIISelLowering.cpp:77!\n",
            "compile_error",
            "compiler-diagnostic",
        ),
        ("error: ran out of registers during register allocation\n", "compile_error", "compiler-diagnostic"),
        ("nvrtcCompileProgram: NVRTC_ERROR_COMPILATION\n", "compile_error", "compiler-diagnostic"),
        (
            "error: <unknown>:0:0: in function k void (): local memory (70000) exceeds limit (65536)\n",
            "compile_error",
            "compiler-diagnostic",
        ),
        (
            "kernel.py:40:16: error: 'tt.dot' op operand 0 has an unsupported layout\n",
            "compile_error",
            "compiler-diagnostic",
        ),
        (
            "torch._inductor.exc.LoweringException: AssertionError: unsupported dtype\n",
            "compile_error",
            "inductor-triton-error",
        ),
        (
            "urllib.error.HTTPError: HTTP Error 503: Service Unavailable\n",
            "infra_error",
            "network-unreachable",
        ),
        (
            "socket.gaierror: [Errno 11001] getaddrinfo failed\n",
            "infra_error",
            "network-unreachable",
        ),
        (
            "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: 65536\n",
            "compile_error",
            "compiler-diagnostic",
        ),
        (
            "test\\gemm_test.cpp(120): error: Expected equality of these values:\n",
            "numerical_mismatch",
            "tensors-not-close",
        ),
        ("  Actual: false (1.2500000 not close to 1.2509766)\n", "numerical_mismatch", "tensors-not-close"),
        ("rocblas_gemm_ex: rocblas_status_check_numerics_fail\n", "numerical_mismatch", "tensors-not-close"),
        (
            "InvalidArgumentError: logits : Tensor had NaN values [Op:CheckNumerics]\n",
            "numerical_mismatch",
            "tensors-not-close",
        ),
        (
            "FloatingPointError: invalid value (nan) encountered in dot_general\n",
            "numerical_mismatch",
            "tensors-not-close",
        ),
        ("  exitcode  : -11 (pid: 4242)\n", "segfault", "segmentation-fault"),
        ("  exitcode  : -9 (pid: 4242)\n", "infra_error", "host-oom-killed"),
        ("Signal 9 (SIGKILL) received by PID 4242\n", "infra_error", "host-oom-killed"),
        ("clang++: error: unable to execute command: Killed\n", "infra_error", "host-oom-killed"),
        ("Memory cgroup out of memory: Killed process 4242 (python)\n", "infra_error", "host-oom-killed"),
        (
            "urllib.error.URLError: <urlopen error [Errno 111] Connection refused>\n",
            "infra_error",
            "network-unreachable",
        ),
        (
            "requests.exceptions.ConnectionError: ('Connection aborted.', RemoteDisconnected('closed'))\n",
            "infra_error",
            "network-unreachable",
        ),
        ("npm ERR! code ENOTFOUND\n", "infra_error", "network-unreachable"),
        (
            "pip._vendor.urllib3.exceptions: HTTPConnectionPool(host='mirror', port=80): Read timed out.\n",
            "infra_error",
            "network-unreachable",
        ),
        ("getaddrinfo: No address associated with hostname\n", "infra_error", "network-unreachable"),
        ("wget: unable to resolve host address 'files.example.org'\n", "infra_error", "network-unreachable"),
        (
            "curl: (22) The requested URL returned error: 503 Service Unavailable\n",
            "infra_error",
            "network-unreachable",
        ),
        ("docker pull: received unexpected HTTP status: 502 Bad Gateway\n", "infra_error", "network-unreachable"),
        (
            "ERROR: Preparation failed: Error response from daemon: no such volume\n",
            "infra_error",
            "runner-system-failure",
        ),
        ("Exited with status -1 (agent lost)\n", "infra_error", "runner-system-failure"),
        ("Agent went offline during the build\n", "infra_error", "runner-system-failure"),
        (
            "Cannot contact gpu-node-4: java.lang.InterruptedException\n",
            "infra_error",
            "runner-system-failure",
        ),
        (
            "fatal error: error in backend: Cannot select: intrinsic %llvm.amdgcn.x\n",
            "compile_error",
            "compiler-diagnostic",
        ),
        (
            "NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus.\n",
            "device_not_available",
            "device-not-visible",
        ),
        ("fatal: the remote end hung up unexpectedly\n", "infra_error", "network-unreachable"),
        ("error: RPC failed; curl 92 HTTP/2 stream 5 was not closed cleanly\n", "infra_error", "network-unreachable"),
        (
            "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed\n",
            "infra_error",
            "network-unreachable",
        ),
    ],
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
