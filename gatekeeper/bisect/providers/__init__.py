"""The providers of candidates: git commits, pip package versions, container image tags."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gatekeeper.bisect.providers.base import OUT, Candidate, Invocation, Prepared, Provider, Unavailable
from gatekeeper.core.errors import InputError

__all__ = ["OUT", "PROVIDERS", "Candidate", "Invocation", "Prepared", "Provider", "Unavailable", "make_provider"]

PROVIDERS = ("git", "pip", "image")


def make_provider(
    name: str, options: Mapping[str, str | None], *, stage_mode: bool, repo: str | Path = "."
) -> Provider:
    """The provider called ``name`` with its options (bisect.json's ``request.options``)."""
    if name == "git":
        from gatekeeper.bisect.providers.git import GitProvider

        return GitProvider(repo)
    if name == "pip":
        from gatekeeper.bisect.providers.pip import PipProvider

        return PipProvider(
            package=options.get("package"),
            index_url=options.get("index_url"),
            find_links=options.get("find_links"),
            with_gatekeeper=stage_mode,
        )
    if name == "image":
        from gatekeeper.bisect.providers.image import ImageProvider

        return ImageProvider(
            image=options.get("image"),
            engine=options.get("engine"),
            tags_file=options.get("tags_file"),
            gpu=options.get("gpu") or "auto",
            workdir=repo,
        )
    raise InputError(None, "--provider", f"{name!r} is not a provider", f"use one of {', '.join(PROVIDERS)}")
