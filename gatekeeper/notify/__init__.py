"""Notifications: Slack alerts, the merge-request note and commit status, and the spool.

Sending never changes the pipeline's verdict or exit code: every function here
returns 0 once its input is valid (bad input is InputError, exit 2). A message
that cannot be delivered after retries is logged (redacted) and spooled to
``<spool>/pending/`` for ``gatekeeper notify --resend``.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode
from gatekeeper.core.gitlab_api import TOKEN_VARIABLE, GitLabError, client_from_env
from gatekeeper.core.locking import LockTimeout, locked
from gatekeeper.core.redact import redact
from gatekeeper.notify import dedupe, spool
from gatekeeper.notify.alert import Alert, load_alert, severity_of
from gatekeeper.notify.gitlab_note import commit_status, note_body, publish
from gatekeeper.notify.slack import SlackSendError, SlackTarget, send
from gatekeeper.notify.slack_message import build_message

__all__ = ["notify_gitlab", "notify_slack", "resend"]

Log = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def notify_slack(
    *,
    verdict: str | Path,
    analysis: str | Path | None = None,
    state: str | Path | None = None,
    spool_dir: str | Path = "alerts",
    channel: str | None = None,
    repeat_after_h: float = 24.0,
    timeout: float = 10.0,
    retries: int = 3,
    environ: Mapping[str, str] | None = None,
    now: dt.datetime | None = None,
    log: Log = _stderr,
) -> int:
    env = os.environ if environ is None else environ
    now = now or dt.datetime.now(dt.timezone.utc)
    alert = load_alert(verdict, analysis, env)
    common: dict[str, Any] = {
        "spool_dir": spool_dir, "channel": channel, "repeat_after_h": repeat_after_h, "timeout": timeout,
        "retries": retries, "env": env, "now": now, "log": log,
    }  # fmt: skip
    if state is None:
        return _slack(alert, None, **common)
    # The state is read, decided on and written under one lock: concurrent jobs neither lose
    # each other's update nor both announce the same breakage.
    try:
        with locked(state, timeout_s=max(60.0, 4 * timeout * (retries + 1))):
            return _slack(alert, Path(state), **common)
    except LockTimeout as err:
        log(f"gatekeeper: notify slack: {err}; alerting without the state")
        return _slack(alert, None, **common)


def _slack(
    alert: Alert,
    state: Path | None,
    *,
    spool_dir: str | Path,
    channel: str | None,
    repeat_after_h: float,
    timeout: float,
    retries: int,
    env: Mapping[str, str],
    now: dt.datetime,
    log: Log,
) -> int:
    key = f"{alert.verdict.channel}:{alert.context.ref or '-'}:{alert.context.job_name or 'gatekeeper'}"
    current = None
    if state is not None:
        try:
            current = dedupe.load_state(state)
        except InputError as err:  # a broken state file must not cost the alert
            log(f"gatekeeper: notify slack: {err.line()}; alerting without the state (the file is left as it is)")
            state = None
    if state is not None and current is not None:
        decision = dedupe.decide(current, key, failing=alert.failing, now=now, repeat_after_s=repeat_after_h * 3600)
    else:
        decision = (
            dedupe.Decision(True, "started", "no --state: every failure alerts")
            if alert.failing
            else dedupe.Decision(False, "ok", "passing; without --state recoveries are not announced")
        )
    alerted = False
    target = SlackTarget.from_env(env, channel=channel)
    if not decision.send:
        log(f"gatekeeper: notify slack: nothing sent ({decision.reason})")
    elif target is None:
        log("gatekeeper: notify slack: not configured (set SLACK_WEBHOOK_URL, or SLACK_BOT_TOKEN and --channel)")
    else:
        severity = severity_of(alert, recovered=decision.kind == "recovered")
        message = build_message(alert, kind=decision.kind, severity=severity)
        try:
            send(message, target, timeout=timeout, retries=retries)
            log(f"gatekeeper: notify slack: sent {decision.kind} alert ({severity}) via {target.describe()}")
        except Exception as err:  # SlackSendError, or a bug: either way the message is spooled, never lost
            payload = {"message": message, "channel": target.channel}
            path = spool.spool(spool_dir, "slack", payload, _describe(err), secrets=target.secrets)
            log(
                redact(
                    f"gatekeeper: notify slack: not delivered: {_describe(err)}; spooled to {path}",
                    extra=target.secrets,
                )
            )
        alerted = True  # delivered or spooled: either way this run's alert exists
    if state is not None and current is not None:
        dedupe.save_state(state, dedupe.record(current, key, failing=alert.failing, now=now, alerted=alerted))
    return ExitCode.PASS


def _describe(err: Exception) -> str:
    if isinstance(err, (SlackSendError, GitLabError)):
        return str(err)
    return f"unexpected {type(err).__name__}: {err}"


def notify_gitlab(
    *,
    verdict: str | Path,
    analysis: str | Path | None = None,
    spool_dir: str | Path = "alerts",
    timeout: float = 20.0,
    retries: int = 3,
    environ: Mapping[str, str] | None = None,
    log: Log = _stderr,
) -> int:
    env = os.environ if environ is None else environ
    alert = load_alert(verdict, analysis, env)
    client = client_from_env(env, timeout=(min(timeout, 5.0), timeout), retries=retries)
    if client is None:
        log(
            f"gatekeeper: notify gitlab: {TOKEN_VARIABLE} or CI_API_V4_URL not set: no MR note or commit status "
            "(CI_JOB_TOKEN cannot write them; add a project access token with api scope as a masked variable)"
        )
        return ExitCode.PASS
    project = env.get("CI_PROJECT_ID") or env.get("CI_PROJECT_PATH")
    if not project:
        log("gatekeeper: notify gitlab: CI_PROJECT_ID not set: not in a GitLab pipeline, nothing sent")
        return ExitCode.PASS
    payload = {
        "project": project,
        "mr_iid": alert.context.mr_iid,
        "sha": alert.commit,
        "note": note_body(alert),
        "status": commit_status(alert),
        "pipeline_id": alert.context.pipeline_id,
    }
    if not payload["mr_iid"] and not payload["sha"]:
        log("gatekeeper: notify gitlab: no merge request and no commit SHA: nothing to post")
        return ExitCode.PASS
    try:
        for line in publish(client, payload):
            log(f"gatekeeper: notify gitlab: {line}")
    except Exception as err:  # GitLabError, or a bug: either way the message is spooled, never lost
        path = spool.spool(spool_dir, "gitlab", payload, _describe(err), secrets=[client.token])
        log(
            redact(
                f"gatekeeper: notify gitlab: not delivered: {_describe(err)}; spooled to {path}", extra=[client.token]
            )
        )
    return ExitCode.PASS


def resend(
    *,
    spool_dir: str | Path = "alerts",
    timeout: float = 10.0,
    retries: int = 3,
    environ: Mapping[str, str] | None = None,
    log: Log = _stderr,
) -> int:
    env = os.environ if environ is None else environ
    entries, problems = spool.pending(spool_dir)
    for line in problems:
        log(f"gatekeeper: notify --resend: {line}")
    sent = failed = taken = 0
    for listed in entries:
        entry = spool.claim(listed)  # another process resending at the same time sends it, not us
        if entry is None:
            taken += 1
            continue
        secrets: list[str] = []
        try:
            if entry.kind == "slack":
                target = SlackTarget.from_env(env, channel=entry.payload.get("channel"))
                if target is None:
                    raise SlackSendError("Slack is not configured (SLACK_WEBHOOK_URL or SLACK_BOT_TOKEN)")
                secrets = target.secrets
                send(entry.payload["message"], target, timeout=timeout, retries=retries)
            else:
                client = client_from_env(env, timeout=(min(timeout, 5.0), timeout), retries=retries)
                if client is None:
                    raise GitLabError(f"{TOKEN_VARIABLE} or CI_API_V4_URL not set")
                secrets = [client.token]
                if entry.kind == "gitlab_issue":
                    from gatekeeper.notify import issue

                    issue.publish(client, entry.payload)
                else:
                    publish(client, entry.payload)
        except (SlackSendError, GitLabError) as err:
            failed += 1
            spool.release(entry, str(err), secrets=secrets)
            log(redact(f"gatekeeper: notify --resend: {entry.path.name}: still failing: {err}", extra=secrets))
            continue
        except Exception as err:  # the entry itself is bad: set it aside, go on with the next
            problems.append(spool.quarantine(entry.path, _describe(err)))
            log(redact(f"gatekeeper: notify --resend: {problems[-1]}", extra=secrets))
            continue
        sent += 1
        spool.remove(entry)
    others = f", {taken} taken by another process" if taken else ""
    log(
        f"gatekeeper: notify --resend: {sent} sent, {failed} still pending, {len(problems)} unreadable"
        f" (quarantined){others}"
        if problems
        else f"gatekeeper: notify --resend: {sent} sent, {failed} still pending, 0 unreadable{others}"
    )
    return ExitCode.PASS
