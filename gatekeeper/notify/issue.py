"""One GitLab issue per regression signature: created from a bisection, commented, closed on recovery.

A *signature* is (metric, channel, device fingerprint, culprit), as
``gatekeeper bisect`` records it in bisect.json (``result.signature``). Its
issue carries a hidden marker with the signature's key and fields; each run
finds *our* issue by that marker among the issues with the ``LABEL`` label
written by the token's own user (``GET /user``: anyone can copy a marker into
an issue of theirs), so one signature never gets two issues:

- a bisection of a signature with no issue creates one: the change point, the
  bisection table, what changed (commits, package versions, image digests) and
  the link to the repro bundle;
- a bisection of a signature whose issue exists updates its description and
  adds a comment ("seen again"); a closed one is reopened ("regressed again");
- a verdict (``--verdict``) whose gate on the signature's metric fails adds a
  comment to the open issue of that metric, channel and device; one whose gate
  passes closes it ("recovered").

What is sent is built from *data* (the payload below, spooled as data when
GitLab cannot be reached, rendered again on ``notify --resend``), never from
text read back from GitLab. Every value from artifacts is escaped for GitLab
markdown (``gatekeeper.core.escape``: no HTML, links, mentions, references or
quick actions) and the whole text is redacted before it leaves.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gatekeeper.contract.bisect_report import fingerprint, signature_key
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode
from gatekeeper.core.gitlab_api import RETRY_STATUSES, GitLabClient, GitLabError, client_from_env, no_client_line
from gatekeeper.core.redact import redact
from gatekeeper.notify import spool
from gatekeeper.notify.issue_text import MARKER, parse_marker, render_description, seen_note, title

Log = Callable[[str], None]

__all__ = [
    "LABEL",
    "MARKER",
    "bisect_payload",
    "notify_issue",
    "parse_marker",
    "publish",
    "render_description",
    "verdict_payload",
]

LABEL = "gatekeeper-regression"
MAX_ROWS = 60
MAX_COMMITS = 50
MAX_TEXT = 300


def _clip(text: object, n: int = MAX_TEXT) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= n else s[: n - 3] + "..."


# ---------------------------------------------------------------------- payloads (data, spooled as they are)


def bisect_payload(doc: Mapping[str, Any], *, project: str, links: Mapping[str, str | None]) -> dict[str, Any]:
    """What ``notify issue --bisect`` sends, as data: the signature and a bounded summary of the bisection."""
    result = doc["result"]
    cands = doc["candidates"]
    rows = []
    for c in cands:
        if c["state"] == "untried":
            continue
        last = c["decisions"][-1] if c["decisions"] else None
        medians = [
            x for r in c["rounds"] for m in (r.get("metrics") or {}).values() for x in m.get("process_medians", [])
        ]
        units = [m.get("unit", "") for r in c["rounds"] for m in (r.get("metrics") or {}).values()]
        measured = ""
        if medians:
            medians.sort()
            measured = f"{medians[len(medians) // 2]:.4g} {units[0] if units else ''}".strip()
        elif c["rounds"] and c["rounds"][-1]["exit_code"] is not None:
            measured = f"exit {c['rounds'][-1]['exit_code']}"
        rows.append(
            {
                "index": c["index"],
                "label": _clip(c["label"], 40),
                "ref": _clip(c["ref"], 120),
                "decision": "skipped" if c["state"] == "unavailable" else (last["decision"] if last else "-"),
                "processes": sum(r.get("processes") or 1 for r in c["rounds"]),
                "measured": measured,
                "why": _clip(c.get("unavailable") if c["state"] == "unavailable" else (last or {}).get("reason", "")),
            }
        )
    culprits = []
    for k in result["culprits"]:
        changes = dict(k.get("changes") or {})
        if isinstance(changes.get("commits"), list):
            changes["commits"] = [
                {"sha": _clip(x.get("sha"), 64), "subject": _clip(x.get("subject"), 200)}
                for x in changes["commits"][:MAX_COMMITS]
            ]
        changes.pop("diffstat", None)
        culprits.append(
            {
                "first_bad": _clip(cands[k["first_bad"]]["ref"], 120),
                "last_good": _clip(cands[k["last_good"]]["ref"], 120),
                "exact": bool(k["exact"]),
                "unresolved": [_clip(cands[i]["label"], 40) for i in k["unresolved"]],
                "symptom": _clip(k.get("symptom"), 600),
                "changes": json.loads(json.dumps(changes, default=str)),
            }
        )
    sig = dict(result["signature"])
    return {
        "project": project,
        "action": "bisect",
        # redacted here, once: the issue's marker carries these values as they are (a command line may hold a token)
        "signature": {
            k: None if sig.get(k) is None else redact(str(sig[k]))
            for k in ("metric", "channel", "fingerprint", "culprit")
        },
        "provider": doc["request"]["provider"],
        "summary": {"run": doc["summary"]["run"], "candidates": doc["summary"]["candidates"]},
        "note": _clip(result.get("note"), 600),
        "rows": rows[:MAX_ROWS],
        "culprits": culprits,
        "links": {k: v for k, v in links.items() if v},
    }


def verdict_payload(verdict: Any, *, project: str, links: Mapping[str, str | None]) -> dict[str, Any]:
    """What ``notify issue --verdict`` sends: per gate metric, whether it fails or passes on this run."""
    gates = [
        {"metric": g.metric, "name": g.name, "outcome": g.outcome.value, "reason": _clip(g.reason)}
        for g in verdict.gates
        if g.outcome.value in ("fail", "pass")
    ]
    return {
        "project": project,
        "action": "verdict",
        "channel": verdict.channel,
        "fingerprint": fingerprint(verdict.environment),
        "gates": gates[:200],
        "links": {k: v for k, v in links.items() if v},
    }


# ---------------------------------------------------------------------- GitLab


def _whoami(client: GitLabClient) -> int:
    me = client.request("GET", "/user")
    if not isinstance(me, dict) or not isinstance(me.get("id"), int):
        raise GitLabError("GitLab did not say who the token's user is (GET /user): issues cannot be deduplicated")
    return int(me["id"])


def _ours(client: GitLabClient, project: str, me: int) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
    """Our regression issues (any state) with their signatures: written by the token's user, with a valid marker."""
    issues = client.paged(f"{project}/issues", params={"labels": LABEL, "state": "all", "author_id": me})
    out = []
    for issue in issues:
        if not isinstance(issue, Mapping) or (issue.get("author") or {}).get("id") != me:
            continue
        sig = parse_marker(str(issue.get("description") or ""))
        if sig is not None and isinstance(issue.get("iid"), int):
            out.append((issue, sig))
    return out


def _comment(client: GitLabClient, project: str, iid: int, body: str) -> None:
    client.request("POST", f"{project}/issues/{iid}/notes", json={"body": body})


def _create(client: GitLabClient, project: str, me: int, key: str, fields: Mapping[str, Any]) -> str:
    """POST the issue once: after a timeout or 5xx, look for it before posting again (it may have been created)."""
    last = GitLabError(f"GitLab POST {project}/issues: no attempt made")
    for attempt in range(client.retries + 1):
        if attempt:
            client.sleep(client.backoff_s * (2 ** (attempt - 1)))
        try:
            made = client.request("POST", f"{project}/issues", json=dict(fields), retries=0)
            return f"created issue #{made.get('iid') if isinstance(made, dict) else '?'}"
        except GitLabError as err:
            if err.status is not None and err.status not in RETRY_STATUSES:
                raise
            last = err
        try:
            found = [i for i, s in _ours(client, project, me) if signature_key(s) == key]
        except GitLabError:
            found = []
        if found:
            return f"created issue #{found[0]['iid']} (found after the POST failed)"
    raise last


def publish(client: GitLabClient, payload: Mapping[str, Any]) -> list[str]:
    """Create, update, comment on, reopen or close our issues as ``payload`` says; what was done, a line each."""
    project = client.project_path(payload["project"])
    me = _whoami(client)
    ours = _ours(client, project, me)
    secrets = [client.token] if client.token else []
    if payload["action"] == "bisect":
        return _publish_bisect(client, project, me, ours, payload, secrets=secrets)
    return _publish_verdict(client, project, ours, payload, secrets)


def _publish_bisect(
    client: GitLabClient, project: str, me: int, ours: list, payload: Mapping[str, Any], *, secrets: list[str]
) -> list[str]:
    sig = payload["signature"]
    key = signature_key(sig)
    body = render_description(payload, secrets=secrets)
    mine = [i for i, s in ours if signature_key(s) == key]
    if not mine:
        fields = {"title": redact(title(payload), extra=secrets), "description": body, "labels": LABEL}
        return [_create(client, project, me, key, fields)]
    issue = mine[0]
    iid = int(issue["iid"])
    done = []
    update: dict[str, Any] = {"description": body}
    reopened = issue.get("state") == "closed"
    if reopened:
        update["state_event"] = "reopen"
    client.request("PUT", f"{project}/issues/{iid}", json=update)
    done.append(f"{'reopened' if reopened else 'updated'} issue #{iid}")
    what = "Regressed again" if reopened else "Seen again"
    first = payload["culprits"][0]["symptom"] if payload["culprits"] else ""
    _comment(client, project, iid, redact(seen_note(payload, f"{what} (bisected again)", first), extra=secrets))
    done.append(f"commented on issue #{iid}")
    return done


def _matches(sig: Mapping[str, Any], metric: str, channel: str, device: str) -> bool:
    metrics = {m.strip() for m in str(sig.get("metric") or "").split(",")}
    return metric in metrics and sig.get("channel") in (None, channel) and sig.get("fingerprint") in ("any", device)


def _publish_verdict(
    client: GitLabClient, project: str, ours: list, payload: Mapping[str, Any], secrets: list[str]
) -> list[str]:
    done = []
    channel, device = payload["channel"], payload["fingerprint"]
    for issue, sig in ours:
        if issue.get("state") != "opened":
            continue
        gates = [g for g in payload["gates"] if _matches(sig, g["metric"], channel, device)]
        if not gates:
            continue
        iid = int(issue["iid"])
        failing = [g for g in gates if g["outcome"] == "fail"]
        if failing:
            reason = "; ".join(f"{g['name']}: {g['reason']}" for g in failing)
            _comment(client, project, iid, redact(seen_note(payload, "Seen again", reason), extra=secrets))
            done.append(f"commented on issue #{iid} (seen again)")
            continue
        reason = "; ".join(f"{g['name']}: {g['reason']}" for g in gates)
        _comment(client, project, iid, redact(seen_note(payload, "Recovered", reason), extra=secrets))
        client.request("PUT", f"{project}/issues/{iid}", json={"state_event": "close"})
        done.append(f"closed issue #{iid} (recovered)")
    return done or ["no open regression issue matches this verdict"]


def payload_problem(payload: Mapping[str, Any]) -> str | None:
    """What is wrong with a spooled issue payload (None: it can be sent)."""
    if not isinstance(payload.get("project"), (str, int)) or isinstance(payload.get("project"), bool):
        return "issue payload has no project"
    if payload.get("action") == "bisect":
        sig = payload.get("signature")
        if not isinstance(sig, Mapping) or not isinstance(payload.get("culprits"), list):
            return "issue payload has no signature or culprits"
        if not isinstance(payload.get("rows"), list) or not isinstance(payload.get("summary"), Mapping):
            return "issue payload has no bisection table"
        return None
    if payload.get("action") == "verdict":
        if not isinstance(payload.get("gates"), list) or not isinstance(payload.get("channel"), str):
            return "issue payload has no gates or channel"
        return None
    return "issue payload has an unknown action"


def _describe(err: Exception) -> str:
    return str(err) if isinstance(err, GitLabError) else f"unexpected {type(err).__name__}: {err}"


def notify_issue(
    *,
    bisect: str | Path | None = None,
    verdict: str | Path | None = None,
    project: str | None = None,
    bundle_url: str | None = None,
    spool_dir: str | Path = "alerts",
    timeout: float = 20.0,
    retries: int = 3,
    environ: Mapping[str, str] | None = None,
    log: Log,
) -> int:
    """The regression issue of a bisection (``bisect``), or a verdict's news for open ones (``verdict``).

    The target project is ``project`` or the job's ``CI_PROJECT_ID`` (never a value read from an artifact).
    """
    env = os.environ if environ is None else environ
    if bool(bisect) == bool(verdict):
        raise InputError(
            None,
            "notify issue",
            "give exactly one of --bisect and --verdict",
            "--bisect bisect/bisect.json files the issue; --verdict V comments or closes",
        )
    links = {"pipeline": env.get("CI_PIPELINE_URL"), "job": env.get("CI_JOB_URL"), "bundle": bundle_url}
    target = project or env.get("CI_PROJECT_ID") or env.get("CI_PROJECT_PATH")
    if bisect:
        from gatekeeper.contract.bisect_report import read_bisect

        doc = read_bisect(bisect)
        if doc["status"] != "done" or not doc["result"]:
            raise InputError(
                bisect,
                "status",
                f"the bisection is {doc['status']}, not done",
                "finish it with gatekeeper bisect --resume, then file the issue",
            )
        if not bundle_url and doc["result"].get("repro_bundle") and env.get("CI_JOB_URL"):
            bundle = Path(bisect).parent / doc["result"]["repro_bundle"]
            try:
                rel = bundle.resolve().relative_to(Path(env.get("CI_PROJECT_DIR") or Path.cwd()).resolve())
                links["bundle"] = f"{env['CI_JOB_URL']}/artifacts/browse/{rel.as_posix()}/"
            except ValueError:
                pass
        payload = bisect_payload(doc, project=str(target or ""), links=links)
    else:
        from gatekeeper.contract.verdict import read_verdict
        from gatekeeper.core.ci_context import PipelineContext
        from gatekeeper.notify.alert import check_context

        read = read_verdict(str(verdict))
        # a verdict of another pipeline, commit or merge request (an earlier one left in the artifacts) never
        # comments on or closes an issue: exit 2, as notify gitlab and slack (docs/security.md, principle 3)
        check_context(read, PipelineContext.from_env(env), str(verdict))
        payload = verdict_payload(read, project=str(target or ""), links=links)
    if not target:
        log("gatekeeper: notify issue: CI_PROJECT_ID not set and no --project: not in a GitLab pipeline, nothing sent")
        return ExitCode.PASS
    client = client_from_env(env, timeout=(min(timeout, 5.0), timeout), retries=retries)
    if client is None:
        log(no_client_line("notify issue", "issue filed"))
        return ExitCode.PASS
    try:
        for line in publish(client, payload):
            log(f"gatekeeper: notify issue: {line}")
    except Exception as err:  # GitLabError, or a bug: either way the data is spooled, never lost
        # Spooled as data, signed, with the job's own project as its target; --resend re-renders it.
        data = {"target": {"project": str(target)}, "issue": payload}
        path, signed = spool.spool(
            spool_dir, "gitlab_issue", data, _describe(err), key=env.get(spool.KEY_VARIABLE), secrets=[client.token]
        )
        unsigned = "" if signed else f" (unsigned: {spool.KEY_VARIABLE} is not set, so --resend will not send it)"
        log(
            redact(
                f"gatekeeper: notify issue: not delivered: {_describe(err)}; spooled to {path}{unsigned}",
                extra=[client.token],
            )
        )
    return ExitCode.PASS
