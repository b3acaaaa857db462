"""verdict.json / analysis.json files for the notification tests, built from the real classes."""

from __future__ import annotations

import json
from pathlib import Path

from gatekeeper.contract.verdict import GateResult, Outcome, Verdict

SECRET_HOOK_PART = "T0SECRET/B0SECRET/xoxSecretWebhookPart123"

# The pipeline a test verdict was computed in (evaluate records it from the CI variables).
DEFAULT_CONTEXT = {
    "pipeline_source": "push",
    "ref": "main",
    "tag": None,
    "commit": "0123456789abcdef0123456789abcdef01234567",
    "mr_iid": None,
    "target_branch": None,
    "pipeline_id": "991",
    "pipeline_url": "https://gitlab.example.com/ml/model/-/pipelines/991",
    "job_url": "https://gitlab.example.com/ml/model/-/jobs/4242",
    "project_url": "https://gitlab.example.com/ml/model",
    "job_name": "gates",
}
_VARIABLES = {
    "pipeline_source": "CI_PIPELINE_SOURCE",
    "ref": "CI_COMMIT_REF_NAME",
    "tag": "CI_COMMIT_TAG",
    "commit": "CI_COMMIT_SHA",
    "mr_iid": "CI_MERGE_REQUEST_IID",
    "target_branch": "CI_MERGE_REQUEST_TARGET_BRANCH_NAME",
    "pipeline_id": "CI_PIPELINE_ID",
    "pipeline_url": "CI_PIPELINE_URL",
    "job_url": "CI_JOB_URL",
    "project_url": "CI_PROJECT_URL",
    "job_name": "CI_JOB_NAME",
}


def context_of(overrides: dict | None = None) -> dict:
    return {**DEFAULT_CONTEXT, **(overrides or {})}


def job_env(overrides: dict | None = None) -> dict[str, str]:
    """The CI variables of a job in the pipeline ``write_verdict(context=overrides)`` describes: notify takes
    where a message goes from these, and refuses a verdict that contradicts them."""
    ctx = context_of(overrides)
    return {var: str(ctx[name]) for name, var in _VARIABLES.items() if ctx.get(name) is not None}


def write_verdict(
    tmp_path: Path,
    *,
    result: str = "blocked",
    channel: str = "stable",
    context: dict | None = None,
    gates: list[GateResult] | None = None,
    name: str = "verdict.json",
) -> Path:
    if gates is None:
        gates = [
            GateResult(
                "p99-latency",
                Outcome.FAIL if result == "blocked" else Outcome.PASS,
                "P99 14.2 ms is 29.1% above the baseline 11.0 ms (rule <= +20%)",
                "p99_latency_ms",
                value=14.2,
                unit="ms",
                rule="<= +20%",
                baseline_value=11.0,
                change=0.291,
            ),
            GateResult(
                "op-coverage",
                Outcome.PASS,
                "98.7% of ops pass",
                "op_pass_rate",
                value=0.987,
                unit="ratio",
                rule=">= 95%",
            ),
            GateResult(
                "memory-growth",
                Outcome.WARN,
                "31 MB/h is above the warn tier 25 MB/h",
                "memory_growth",
                severity="advisory",
                value=31.0,
                unit="MB/h",
                rule="<= 50 MB/h",
            ),
        ]
    ctx = context_of(context)
    verdict = Verdict(
        result=result,
        summary="1 blocking gate failed: p99-latency." if result == "blocked" else "All blocking gates passed.",
        channel=channel,
        gates=tuple(gates),
        context=ctx,
        environment={
            "torch_version": "2.5.1+rocm6.2",
            "device_kind": "rocm",
            "device_name": "AMD Instinct MI210",
            "gfx_arch": "gfx90a",
        },
        generated_at="2026-12-02T15:00:00+00:00",
        gates_file="gates.yaml",
    )
    path = tmp_path / name
    path.write_text(json.dumps(verdict.to_dict()))
    return path


def write_analysis(tmp_path: Path) -> Path:
    doc = {
        "schema": "gatekeeper.analysis/v1",
        "category": "device_oom",
        "known_issue": "device-out-of-memory",
        "confidence": 0.9,
        "explanation": "The GPU ran out of memory for an allocation.",
        "remediation": ["Set PYTORCH_HIP_ALLOC_CONF=expandable_segments:True", "Lower the batch size"],
        "matches": [{"source": "job.log", "line": 10, "text": "torch.OutOfMemoryError: HIP out of memory."}],
    }
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(doc))
    return path
