"""The static policy of a pipeline: what GitLab's predefined variables allow a channel to do.

Defence in depth behind the CI template's ``rules:``: a nightly build on a tag
pipeline is refused even when someone edited the rule away, and on a tag, the
protected branch or a merge request into it the stable channel is never skipped
by a breaker (a release or a merge depends on its gate).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PolicyDecision", "static_policy"]


@dataclass(frozen=True)
class PolicyDecision:
    allowed: bool
    may_fail: bool  # a failure does not block (merge request into an unprotected branch)
    message: str
    protected: bool = False  # a tag, the protected branch, or a merge request into it: the gate must decide

    def never_skips(self, channel: str) -> bool:
        """Here the breaker may not short-circuit this channel's jobs: a release or a merge depends on its gate."""
        return self.protected and channel == "stable"


def static_policy(environ: Mapping[str, str], channel: str, protected_branch: str | None = None) -> PolicyDecision:
    """What the pipeline context allows for ``channel``, from GitLab's predefined variables."""
    tag = environ.get("CI_COMMIT_TAG", "")
    source = environ.get("CI_PIPELINE_SOURCE", "")
    protected = (
        protected_branch or environ.get("GATEKEEPER_PROTECTED_BRANCH") or environ.get("CI_DEFAULT_BRANCH") or "main"
    )
    if channel == "nightly" and tag:
        return PolicyDecision(
            False,
            False,
            f"policy: the nightly channel never runs on tag pipelines (tag {tag!r}); "
            "a release is validated on the stable channel only. Restore the template's "
            "'if: $CHANNEL == \"nightly\" && $CI_COMMIT_TAG' rule (when: never)",
        )
    target = environ.get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "")
    if source == "merge_request_event" and target and target != protected:
        return PolicyDecision(
            True, True, f"policy: merge request into {target!r} (not {protected!r}): failures do not block"
        )
    ref = environ.get("CI_COMMIT_REF_NAME") or ""
    where = f"tag {tag}" if tag else f"{source or 'pipeline'} on {ref or '?'}"
    is_protected = bool(tag) or (
        target == protected if source == "merge_request_event" else bool(source) and ref == protected
    )
    return PolicyDecision(True, False, f"policy: {channel} channel allowed ({where}); failures block", is_protected)
