"""The search: first bad candidate between a known good (``lo``) and a known bad (``hi``). Pure.

Binary search over the candidate indices, with ``git bisect skip`` semantics
for candidates that cannot be decided: a candidate that was skipped (it could
not be built or installed, the command said 125) or stayed unknown after the
process budget is left out, and the next try is the untried candidate nearest
to the middle of what is left. When only such candidates remain between the
last good and the first bad, the first bad is one of them or ``hi``: the result
says so (``exact`` false, ``unresolved`` lists them) instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Found", "first_bad", "max_decisions"]


@dataclass(frozen=True)
class Found:
    last_good: int
    first_bad: int
    unresolved: tuple[int, ...] = field(default_factory=tuple)  # skipped/unknown candidates between them

    @property
    def exact(self) -> bool:
        return not self.unresolved


def max_decisions(n: int) -> int:
    """The most candidates a clean bisection of ``n`` (both ends included) runs: ceil(log2 n) + 2."""
    return (max(n, 1) - 1).bit_length() + 2


def first_bad(lo: int, hi: int, decide: Callable[[int], str]) -> Found:
    """``decide(i)`` -> "good" | "bad" | "skip" | "unknown" for lo < i < hi; lo is good, hi is bad."""
    if lo >= hi:
        raise ValueError(f"empty range: {lo}..{hi}")
    left_out: set[int] = set()
    while True:
        open_ = [i for i in range(lo + 1, hi) if i not in left_out]
        if not open_:
            return Found(lo, hi, tuple(i for i in range(lo + 1, hi) if i in left_out))
        middle = (lo + hi) / 2
        pick = min(open_, key=lambda i: (abs(i - middle), i))
        answer = decide(pick)
        if answer == "good":
            lo = pick
        elif answer == "bad":
            hi = pick
        elif answer in ("skip", "unknown"):
            left_out.add(pick)
        else:
            raise ValueError(f"decide({pick}) answered {answer!r}")
