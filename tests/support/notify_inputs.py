"""verdict.json / analysis.json files for the notification tests, built from the real classes."""

from __future__ import annotations

import json
from pathlib import Path

from gatekeeper.contract.verdict import GateResult, Outcome, Verdict

SECRET_HOOK_PART = "T0SECRET/B0SECRET/xoxSecretWebhookPart123"


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
    ctx = {
        "pipeline_source": "push",
        "ref": "main",
        "tag": None,
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "mr_iid": None,
        "target_branch": None,
        "pipeline_url": "https://gitlab.example.com/ml/model/-/pipelines/991",
        "job_url": "https://gitlab.example.com/ml/model/-/jobs/4242",
        "project_url": "https://gitlab.example.com/ml/model",
        "job_name": "gates",
    }
    ctx.update(context or {})
    verdict = Verdict(
        result=result,
        summary="1 blocking gate failed: p99-latency." if result == "blocked" else "All blocking gates passed.",
        channel=channel,
        gates=tuple(gates),
        context=ctx,
        environment={"torch_version": "2.5.1+rocm6.2", "device_name": "AMD Instinct MI210", "gfx_arch": "gfx90a"},
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
