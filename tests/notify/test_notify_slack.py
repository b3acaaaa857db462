"""Slack alerts against a local server that answers like Slack: ok, 429, 500, timeouts, refusal."""

from __future__ import annotations

import datetime as dt
import json
import logging

import pytest

from gatekeeper.cli import main
from gatekeeper.contract.verdict import GateResult, Outcome
from gatekeeper.notify import notify_slack, resend
from gatekeeper.notify.alert import load_alert, severity_of
from gatekeeper.notify.slack import SlackSendError, SlackTarget, send
from gatekeeper.notify.slack_message import HEADER_MAX, MAX_BLOCKS, SECTION_MAX, build_message
from tests.support.fake_http import FakeServer, Reply, refused_url
from tests.support.notify_inputs import SECRET_HOOK_PART, job_env, write_analysis, write_verdict

SPOOL_KEY = "spool-key-SECRET-0123456789abcdef"


def _env(url: str, context: dict | None = None) -> dict[str, str]:
    """A job of the pipeline the verdict was computed in (``context``)."""
    return {
        **job_env(context),
        "SLACK_WEBHOOK_URL": f"{url}/services/{SECRET_HOOK_PART}",
        "GATEKEEPER_SPOOL_KEY": SPOOL_KEY,
    }


def _run(tmp_path, env, lines, **kw):
    return notify_slack(
        verdict=kw.pop("verdict", None) or write_verdict(tmp_path),
        spool_dir=tmp_path / "alerts",
        environ=env,
        log=lines.append,
        retries=kw.pop("retries", 1),
        timeout=kw.pop("timeout", 5.0),
        **kw,
    )


def _no_secret_anywhere(tmp_path, lines, capsys, caplog):
    captured = capsys.readouterr()
    texts = [*lines, captured.out, captured.err, caplog.text]
    texts += [p.read_text() for p in tmp_path.rglob("*") if p.is_file()]
    assert not [t for t in texts if "SECRET" in t]


def test_webhook_ok_sends_the_block_kit_payload(tmp_path, capsys, caplog):
    lines: list[str] = []
    with FakeServer() as srv:
        rc = _run(tmp_path, _env(srv.url), lines, analysis=write_analysis(tmp_path))
    assert rc == 0
    assert len(srv.seen) == 1
    assert srv.seen[0].path == f"/services/{SECRET_HOOK_PART}"
    payload = srv.seen[0].json()
    header = payload["blocks"][0]["text"]["text"]
    assert "BLOCKED" in header
    text = json.dumps(payload)
    assert "*Severity:* critical" in text
    assert (
        "*p99-latency* fail: 14.2 ms, rule `&lt;= +20%`, baseline 11 ms, change +29.1%" in text
    )  # Slack wants < as &lt; even in code
    assert "`device_oom`" in text
    assert "PYTORCH_HIP_ALLOC_CONF=expandable_segments:True" in text
    assert "<https://gitlab.example.com/ml/model/-/pipelines/991|Pipeline>" in text
    assert lines == ["gatekeeper: notify slack: sent started alert (critical) via incoming webhook"]
    assert not (tmp_path / "alerts").exists()
    _no_secret_anywhere(tmp_path, lines, capsys, caplog)


def test_429_honours_retry_after_then_sends():
    slept: list[float] = []
    with FakeServer([Reply(429, "rate_limited", {"Retry-After": "3"})]) as srv:
        send({"text": "hi"}, SlackTarget(webhook_url=f"{srv.url}/services/x"), retries=2, sleep=slept.append)
    assert slept == [3.0]
    assert len(srv.seen) == 2


def test_5xx_is_retried_with_backoff():
    with FakeServer([Reply(500, "oops"), Reply(503, "busy")]) as srv:
        send({"text": "hi"}, SlackTarget(webhook_url=f"{srv.url}/services/x"), retries=2, backoff_s=0.01)
    assert len(srv.seen) == 3


def test_4xx_is_not_retried():
    with FakeServer(default=Reply(404, "no_service")) as srv, pytest.raises(SlackSendError, match="HTTP 404"):
        send({"text": "hi"}, SlackTarget(webhook_url=f"{srv.url}/services/x"), retries=3, backoff_s=0.01)
    assert len(srv.seen) == 1


@pytest.mark.parametrize("failure", ["500", "timeout", "refused"])
def test_final_failure_is_logged_redacted_and_spooled_exit_0(tmp_path, capsys, caplog, failure):
    caplog.set_level(logging.DEBUG)
    lines: list[str] = []
    if failure == "refused":
        rc = _run(tmp_path, _env(refused_url()), lines)
        seen = None
    else:
        reply = Reply(500, "boom") if failure == "500" else Reply(200, "ok", delay_s=1.5)
        with FakeServer(default=reply) as srv:
            rc = _run(tmp_path, _env(srv.url), lines, timeout=0.3)
        seen = len(srv.seen)
    assert rc == 0
    if seen is not None:
        assert seen == 2  # one retry
    pending = list((tmp_path / "alerts" / "pending").glob("*-slack-*.json"))
    assert len(pending) == 1
    doc = json.loads(pending[0].read_text())
    assert doc["schema"] == "gatekeeper.alert/v2"
    assert doc["data"]["verdict"]["result"] == "blocked"
    assert doc["data"]["alert"] == {"kind": "started", "severity": "critical"}
    assert "not delivered" in lines[-1]
    assert "spooled to" in lines[-1]
    _no_secret_anywhere(tmp_path, lines, capsys, caplog)


def test_resend_delivers_the_spool_later(tmp_path, capsys, caplog):
    lines: list[str] = []
    with FakeServer(default=Reply(500, "down")) as srv:
        _run(tmp_path, _env(srv.url), lines)
        first = srv.seen[0].json()
    with FakeServer() as srv:
        assert resend(spool_dir=tmp_path / "alerts", environ=_env(srv.url), log=lines.append, retries=0) == 0
    assert srv.seen[0].json() == first
    assert not list((tmp_path / "alerts" / "pending").glob("*.json"))
    assert lines[-1] == "gatekeeper: notify --resend: 1 sent, 0 still pending, 0 quarantined"
    _no_secret_anywhere(tmp_path, lines, capsys, caplog)


def test_resend_keeps_what_still_fails(tmp_path):
    lines: list[str] = []
    with FakeServer(default=Reply(500, "down")) as srv:
        _run(tmp_path, _env(srv.url), lines)
        resend(spool_dir=tmp_path / "alerts", environ=_env(srv.url), log=lines.append, retries=0)
    (entry,) = (tmp_path / "alerts" / "pending").glob("*.json")
    assert json.loads(entry.read_text())["attempts"] == 2
    assert lines[-1] == "gatekeeper: notify --resend: 0 sent, 1 still pending, 0 quarantined"


def test_bot_token_posts_to_chat_post_message(tmp_path):
    lines: list[str] = []
    with FakeServer(default=Reply(200, {"ok": True, "ts": "1.2"})) as srv:
        env = {**job_env(), "SLACK_BOT_TOKEN": "xoxb-0000-secret-bot-token", "SLACK_API_BASE_URL": f"{srv.url}/api/"}
        assert _run(tmp_path, env, lines, channel="#ml-ci") == 0
    (seen,) = srv.seen
    assert seen.path == "/api/chat.postMessage"
    assert seen.headers["Authorization"] == "Bearer xoxb-0000-secret-bot-token"
    body = seen.json()
    assert body["channel"] == "#ml-ci"
    assert body["blocks"][0]["type"] == "header"


def test_bot_token_without_channel_is_refused_before_any_request():
    with FakeServer(default=Reply(200, {"ok": True, "ts": "1.2"})) as srv:
        target = SlackTarget(token="xoxb-0000-secret-bot-token", base_url=f"{srv.url}/api/")
        with pytest.raises(SlackSendError, match="a bot token needs a channel"):
            send({"text": "hi"}, target, retries=0)
    assert srv.seen == []


def test_not_configured_says_so_and_exits_0(tmp_path):
    lines: list[str] = []
    assert _run(tmp_path, {}, lines) == 0
    assert lines == [
        "gatekeeper: notify slack: not configured (set SLACK_WEBHOOK_URL, or SLACK_BOT_TOKEN and --channel)"
    ]


def test_not_configured_is_said_on_a_passing_run_too(tmp_path):
    """docs/notifications.md: "Without a webhook or token the command says so in one line and exits 0" -- on a
    passing run as well, so a pipeline learns Slack is not set up before its first failure's alert is lost."""
    lines: list[str] = []
    assert _run(tmp_path, {}, lines, verdict=write_verdict(tmp_path, result="pass")) == 0
    assert len(lines) == 1, lines
    assert lines[0].startswith("gatekeeper: notify slack: not configured (set SLACK_WEBHOOK_URL"), lines
    assert "nothing to send this time anyway (passing" in lines[0]


def test_block_kit_limits_are_respected_by_truncating(tmp_path):
    gates = [
        GateResult(f"gate-{i}-" + "x" * 60, Outcome.FAIL, "reason " * 200, "m", value=float(i), unit="ms", rule="<= 1")
        for i in range(400)
    ]
    ctx = {"ref": "feature/" + "y" * 300}
    alert = load_alert(write_verdict(tmp_path, gates=gates, context=ctx), write_analysis(tmp_path), job_env(ctx))
    msg = build_message(alert, kind="started", severity="critical")
    blocks = msg["blocks"]
    assert len(blocks) <= MAX_BLOCKS
    assert len(blocks[0]["text"]["text"]) <= HEADER_MAX
    assert all(len(b["text"]["text"]) <= SECTION_MAX for b in blocks if b["type"] == "section")
    assert "more section(s) not shown" in blocks[-2]["text"]["text"]
    assert "|Pipeline>" in blocks[-1]["text"]["text"]  # the links survive the cut


@pytest.mark.parametrize(
    ("result", "channel", "context", "severity"),
    [
        ("blocked", "stable", {}, "critical"),  # push on main
        ("blocked", "stable", {"tag": "v1.2.0", "ref": "v1.2.0"}, "critical"),
        ("blocked", "nightly", {"pipeline_source": "schedule"}, "warning"),
        (
            "blocked",
            "stable",
            {"pipeline_source": "merge_request_event", "mr_iid": "7", "target_branch": "dev"},
            "warning",
        ),
        ("pass", "stable", {}, "info"),
    ],
)
def test_severity(tmp_path, result, channel, context, severity):
    verdict = write_verdict(tmp_path, result=result, channel=channel, context=context)
    alert = load_alert(verdict, None, job_env(context))
    assert severity_of(alert) == severity


def test_no_alert_storm_start_suppress_repeat_recover(tmp_path):
    state = tmp_path / "state.json"
    t0 = dt.datetime(2026, 12, 2, 3, 0, tzinfo=dt.timezone.utc)
    blocked = write_verdict(tmp_path, channel="nightly", context={"pipeline_source": "schedule"})
    passed = write_verdict(
        tmp_path, result="pass", channel="nightly", context={"pipeline_source": "schedule"}, name="ok.json"
    )
    runs = [(blocked, 0), (blocked, 1), (blocked, 30), (passed, 31), (passed, 32)]
    lines: list[str] = []
    with FakeServer() as srv:
        for verdict, hours in runs:
            _run(
                tmp_path,
                _env(srv.url, {"pipeline_source": "schedule"}),
                lines,
                verdict=verdict,
                state=state,
                now=t0 + dt.timedelta(hours=hours),
                repeat_after_h=24,
            )
    headers = [s.json()["blocks"][0]["text"]["text"] for s in srv.seen]
    assert len(headers) == 3  # started, repeat after 24 h, recovered
    assert "BLOCKED" in headers[0]
    assert "BLOCKED (still failing)" in headers[1]
    assert "recovered" in headers[2]
    assert "*Severity:* info" in json.dumps(srv.seen[2].json())
    assert "nothing sent" in lines[1]
    assert "nothing sent" in lines[4]
    assert json.loads(state.read_text())["jobs"]["nightly:main:gates"]["failing"] is False


def test_cli_exit_codes(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SLACK_WEBHOOK_URL", raising=False)
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    assert main(["notify", "slack", "--verdict", str(write_verdict(tmp_path))]) == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["notify", "slack", "--verdict", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"gatekeeper: {bad}:1:2: invalid JSON")
    analysis = tmp_path / "analysis.json"
    analysis.write_text('{"category": "device_oom", "confidence": "high"}')
    assert main(["notify", "slack", "--verdict", str(write_verdict(tmp_path)), "--analysis", str(analysis)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"gatekeeper: {analysis}:confidence: confidence: 'high' is not of type 'number'; hint: see the gatekeeper.analysis/v1 schema"
    )


def test_passing_without_state_sends_nothing(tmp_path):
    lines: list[str] = []
    with FakeServer() as srv:
        assert _run(tmp_path, _env(srv.url), lines, verdict=write_verdict(tmp_path, result="pass")) == 0
    assert srv.seen == []
    assert lines == ["gatekeeper: notify slack: nothing sent (passing; without --state recoveries are not announced)"]


def test_an_alert_state_that_says_it_alerted_in_the_future_is_not_believed():
    # 2026-12-04 audit (a file believed about itself): any job with the cache writes the alert state. A
    # last_alert of 9999 made (now - last_alert) negative, so a failing job's repeat alert was suppressed for
    # ever; a time later than this job's clock now counts as "never alerted", as a garbled one does.
    from gatekeeper.notify.dedupe import decide

    now = dt.datetime(2026, 12, 4, 3, 0, tzinfo=dt.timezone.utc)
    job = {"failing": True, "since": "2026-12-01T03:00:00+00:00"}
    for forged in ("9999-12-31T00:00:00+00:00", (now + dt.timedelta(hours=1)).isoformat()):
        got = decide({"jobs": {"k": {**job, "last_alert": forged}}}, "k", failing=True, now=now, repeat_after_s=86400)
        assert (got.send, got.kind) == (True, "repeat"), forged
    # a real recent alert, and one a few seconds ahead of this runner's clock, still suppress the repeat
    for real in ("2026-12-04T02:00:00+00:00", (now + dt.timedelta(seconds=30)).isoformat()):
        got = decide({"jobs": {"k": {**job, "last_alert": real}}}, "k", failing=True, now=now, repeat_after_s=86400)
        assert (got.send, got.kind) == (False, "suppressed"), real


def test_a_lock_file_planted_as_a_link_or_directory_is_set_aside_and_the_alert_still_goes(tmp_path):
    # 2026-12-04 audit: the alert state's lock was open(path, "a+"): a link planted under its name (the state lives
    # in a cache any job writes) made gatekeeper create an empty file where it pointed, a directory was exit 70.
    state = tmp_path / "state.json"
    target = tmp_path / "elsewhere" / "created-by-gatekeeper"
    target.parent.mkdir()
    for planted in ("link", "directory"):
        lock = tmp_path / "state.json.lock"
        if planted == "link":
            lock.symlink_to(target)
        else:
            lock.unlink()
            lock.mkdir()
        lines: list[str] = []
        with FakeServer() as srv:
            assert _run(tmp_path, _env(srv.url), lines, state=state) == 0
        assert len(srv.seen) == 1, planted  # alerted, without the state
        assert any("state.json.lock" in line and "alerting without the state" in line for line in lines), lines
        assert not target.exists()  # nothing created through the link
