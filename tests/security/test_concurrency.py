"""Spool and state under concurrency: a spooled message is sent once across processes, no state update is lost,
a bad spool entry is quarantined, and notify never exits 70."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from gatekeeper.notify import entry_data, notify_slack, resend, spool
from gatekeeper.notify.alert import load_alert
from tests.support.fake_http import FakeServer, Reply
from tests.support.notify_inputs import write_verdict

REPO = Path(__file__).resolve().parents[2]
PROCESSES = 4
KEY = "spool-key-for-the-concurrency-tests"


def _slack_entry(tmp_path: Path, **data: object) -> Path:
    """A signed Slack entry as notify spools it (``data`` replaces parts of it)."""
    alert = load_alert(write_verdict(tmp_path, name="spooled.json"), None, {})
    doc = entry_data(alert, {"project": None, "mr_iid": None, "channel": None}, how={"kind": "started",
                     "severity": "critical"})  # fmt: skip
    path, _ = spool.spool(tmp_path / "alerts", "slack", {**doc, **data}, "x", key=KEY, secrets=[])
    return path


def _spawn(code: str, env: dict[str, str]) -> list[subprocess.Popen]:
    script = textwrap.dedent(code)
    return [
        subprocess.Popen([sys.executable, "-c", script, str(i)], cwd=REPO, env={**env, "PYTHONPATH": str(REPO)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(PROCESSES)
    ]  # fmt: skip


def _wait(procs: list[subprocess.Popen]) -> list[tuple[int, str]]:
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        out.append((p.returncode, stdout + stderr))
    return out


def test_concurrent_resend_sends_a_spooled_message_once(tmp_path):
    _slack_entry(tmp_path)
    with FakeServer(default=Reply(200, "ok", delay_s=0.5)) as srv:
        env = {
            "SLACK_WEBHOOK_URL": f"{srv.url}/services/T0/B0/XYZ",
            "PATH": "/usr/bin:/bin",
            "GATEKEEPER_SPOOL_KEY": KEY,
        }
        procs = _spawn(f"""
            from gatekeeper.notify import resend
            raise SystemExit(resend(spool_dir={str(tmp_path / "alerts")!r}, log=print))
        """, env)  # fmt: skip
        results = _wait(procs)
    assert [code for code, _ in results] == [0] * PROCESSES, results
    assert len(srv.seen) == 1, results
    assert not list((tmp_path / "alerts" / "pending").glob("*.json"))


def test_concurrent_notify_with_state_loses_no_update(tmp_path):
    state = tmp_path / "state.json"
    for i in range(PROCESSES):
        write_verdict(tmp_path, context={"job_name": f"job{i}"}, name=f"verdict{i}.json")
    with FakeServer(default=Reply(200, "ok", delay_s=0.3)) as srv:
        env = {"SLACK_WEBHOOK_URL": f"{srv.url}/services/T0/B0/XYZ", "PATH": "/usr/bin:/bin"}
        procs = _spawn(f"""
            import os, sys
            from gatekeeper.notify import notify_slack
            i = sys.argv[1]
            os.environ["CI_JOB_NAME"] = f"job{{i}}"  # the job, not the verdict, names the alert's key
            raise SystemExit(notify_slack(verdict={str(tmp_path)!r} + f"/verdict{{i}}.json", state={str(state)!r},
                                          spool_dir={str(tmp_path / "alerts")!r}, log=print))
        """, env)  # fmt: skip
        results = _wait(procs)
    assert [code for code, _ in results] == [0] * PROCESSES, results
    jobs = json.loads(state.read_text())["jobs"]
    assert sorted(k.rsplit(":", 1)[1] for k in jobs) == [f"job{i}" for i in range(PROCESSES)]
    assert len(srv.seen) == PROCESSES


def test_a_bad_spool_entry_is_quarantined_and_the_next_one_is_sent(tmp_path):
    alerts = tmp_path / "alerts"
    bad = _slack_entry(tmp_path, verdict={"not": "a verdict"})
    bad2, _ = spool.spool(alerts, "gitlab", {"note": "no project"}, "x", key=KEY, secrets=[])
    (alerts / "pending" / "00000000T000000-slack-garbage.json").write_text("{ not json")
    _slack_entry(tmp_path)
    lines: list[str] = []
    with FakeServer() as srv:
        env = {"SLACK_WEBHOOK_URL": f"{srv.url}/services/T0/B0/XYZ", "CI_API_V4_URL": f"{srv.url}/api/v4",
               "GATEKEEPER_GITLAB_TOKEN": "glpat-xxxxxxxxxxxxxxxxxxxx", "GATEKEEPER_SPOOL_KEY": KEY}  # fmt: skip
        assert resend(spool_dir=alerts, environ=env, log=lines.append) == 0
    assert len(srv.seen) == 1
    assert "BLOCKED" in srv.seen[0].json()["text"]
    assert not list((alerts / "pending").glob("*.json"))
    quarantined = sorted(p.name for p in (alerts / "quarantine").iterdir())
    assert bad.name in quarantined
    assert bad2.name in quarantined
    assert len(quarantined) == 3, lines
    assert "quarantined" in "\n".join(lines)


def test_a_naive_timestamp_in_the_alert_state_does_not_crash_notify(tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"schema": "gatekeeper.alert_state/v1", "jobs": {"stable:main:gates": {
        "failing": True, "since": "2026-12-01T10:00:00", "last_alert": "2026-12-01T10:00:00", "runs": 1}}}))  # fmt: skip
    lines: list[str] = []
    with FakeServer() as srv:
        env = {"SLACK_WEBHOOK_URL": f"{srv.url}/services/T0/B0/XYZ"}
        code = notify_slack(verdict=write_verdict(tmp_path), state=state, environ=env, log=lines.append,
                            spool_dir=tmp_path / "alerts")  # fmt: skip
    assert code == 0, lines
    assert len(srv.seen) == 1  # an unreadable time is no reason to stay silent


def test_notify_spools_instead_of_crashing_on_an_unexpected_error(tmp_path, monkeypatch):
    import gatekeeper.notify as notify

    def boom(*_a, **_k):
        raise RuntimeError("slack-sdk changed under us")

    monkeypatch.setattr(notify, "send", boom)
    lines: list[str] = []
    code = notify_slack(verdict=write_verdict(tmp_path), environ={"SLACK_WEBHOOK_URL": "https://hooks.slack.com/x"},
                        log=lines.append, spool_dir=tmp_path / "alerts")  # fmt: skip
    assert code == 0
    assert list((tmp_path / "alerts" / "pending").glob("*.json")), lines
