"""``gatekeeper bisect``: which change broke it, across commits, package versions and container images.

``engine.run_bisect`` runs a bisection; ``request`` checks and records what it
is asked, ``document`` keeps bisect.json, ``result`` composes its answer;
``providers`` list and prepare the candidates; ``decide`` judges one candidate
with the gates' own judge; ``search`` is the binary search; ``render`` is the
table the CLI prints.
"""

from __future__ import annotations

from gatekeeper.bisect.engine import BisectOptions, BisectResult, Event, run_bisect

__all__ = ["BisectOptions", "BisectResult", "Event", "run_bisect"]
