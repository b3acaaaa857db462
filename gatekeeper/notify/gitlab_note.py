"""The merge-request note (one per MR, updated in place) and the commit status.

The note carries a hidden marker; each pipeline finds the note with the marker
and edits it, so the MR shows the latest verdict instead of one note per run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gatekeeper.escape import md_code_block, md_code_span, md_link, md_text, terminal
from gatekeeper.gitlab import GitLabClient
from gatekeeper.notify.alert import Alert
from gatekeeper.render import to_markdown

__all__ = ["MARKER", "STATUS_NAME", "commit_status", "note_body", "publish"]

MARKER = "<!-- gatekeeper:verdict -->"
STATUS_NAME = "gatekeeper/gates"
_STATE = {"pass": "success", "warn": "success", "blocked": "failed", "error": "failed"}


def note_body(alert: Alert) -> str:
    parts = [MARKER, to_markdown(alert.verdict)]
    if alert.analysis:
        parts.append(_analysis_md(alert.analysis))
    links = " · ".join(md_link(url, name) for name, url in alert.links.items())
    if links:
        parts.append(links)
    return "\n".join(parts) + "\n"


def _analysis_md(a: Mapping[str, Any]) -> str:
    known = f"known issue {md_code_span(a['known_issue'])}" if a.get("known_issue") else "no known issue matched"
    lines = [
        f"### Failure analysis: {md_code_span(a.get('category'))} ({known}, confidence {a.get('confidence', 0):.2f})",
        "",
        md_text(str(a.get("explanation", ""))),
        "",
    ]
    lines += [f"{i}. {md_text(step)}" for i, step in enumerate(a.get("remediation", []), 1)]
    matches = a.get("matches") or []
    if matches:
        evidence = [f"{m.get('source')}:{m.get('line')}: {m.get('text')}" for m in matches[:5]]
        lines += ["", md_code_block(evidence)]
    return "\n".join(lines) + "\n"


def commit_status(alert: Alert) -> dict[str, Any]:
    v = alert.verdict
    status: dict[str, Any] = {
        "state": _STATE.get(v.result, "failed"),
        "name": STATUS_NAME,
        "description": " ".join(terminal(v.summary, newlines=False).split())[:250],
    }
    if alert.links.pipeline:
        status["target_url"] = alert.links.pipeline
    if alert.context.ref:
        status["ref"] = alert.context.ref
    return status


def publish(client: GitLabClient, payload: Mapping[str, Any]) -> list[str]:
    """Post or update the MR note and set the commit status; what was done, one line each.

    ``payload``: project, mr_iid (or None), sha (or None), note (markdown), status (dict).
    Raises GitLabError (redacted) when a call fails after its retries.
    """
    done: list[str] = []
    project = client.project_path(payload["project"])
    if payload.get("mr_iid"):
        notes_path = f"{project}/merge_requests/{payload['mr_iid']}/notes"
        notes = client.paged(notes_path, params={"sort": "desc", "order_by": "updated_at"})
        ours = next((n for n in notes if MARKER in (n.get("body") or "")), None)
        if ours is not None:
            client.request("PUT", f"{notes_path}/{ours['id']}", json={"body": payload["note"]})
            done.append(f"updated note {ours['id']} on !{payload['mr_iid']}")
        else:
            created = client.request("POST", notes_path, json={"body": payload["note"]})
            done.append(f"created note {created.get('id') if created else '?'} on !{payload['mr_iid']}")
    if payload.get("sha"):
        client.request("POST", f"{project}/statuses/{payload['sha']}", json=payload["status"])
        done.append(f"commit status {payload['status']['state']} on {payload['sha'][:12]}")
    return done
