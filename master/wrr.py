"""Interleaved weighted round robin (seed 4.2.1.1, fig. 4-7).

The seed's steps, with integer weights:

1. load the workers' latest weights;
2. take the worker after the one chosen last and compare its weight with the current schedule weight ``cw``;
3. if its weight is greater than ``cw``, it gets the task;
4. otherwise go to the next worker; when that is the first worker again (a full pass), go to 5;
5. step ``cw`` down by the greatest common divisor of the weights; while ``cw`` is not negative go to 3;
6. else reset ``cw`` to the largest weight and go to 3.

Over one cycle every worker is chosen ``weight / gcd`` times, interleaved (heavier workers are chosen at more
levels of ``cw``, so picks are spread over the cycle rather than in runs). Weights may change between choices
(:meth:`InterleavedWRR.update`): the position and ``cw`` are kept, so a weight update does not restart the cycle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping


class InterleavedWRR:
    def __init__(self, weights: Mapping[str, int] | None = None) -> None:
        self._members: list[str] = []
        self._weights: list[int] = []
        self._last: str | None = None
        self._index = -1
        self._cw = 0
        self._gcd = 1
        self._max = 0
        if weights:
            self.update(weights)

    @property
    def weights(self) -> dict[str, int]:
        return dict(zip(self._members, self._weights, strict=True))

    def update(self, weights: Mapping[str, int]) -> None:
        """New weights (members in a stable order: sorted by name). Weights below 1 leave the rotation."""
        members = sorted(name for name, weight in weights.items() if weight >= 1)
        self._members = members
        self._weights = [int(weights[name]) for name in members]
        self._gcd = math.gcd(*self._weights) if self._weights else 1
        self._max = max(self._weights, default=0)
        self._cw = min(self._cw, self._max)
        # keep the position: continue after the member chosen last (or where it would sort)
        if self._last is None or not members:
            self._index = -1
        else:
            self._index = sum(1 for name in members if name <= self._last) - 1

    def remove(self, member: str) -> None:
        """Take a member out of the rotation (e.g. its queue is full for this round)."""
        weights = self.weights
        if weights.pop(member, None) is not None:
            self.update(weights)

    def choose(self) -> str | None:
        """The next member (None when there is none)."""
        count = len(self._members)
        if count == 0:
            return None
        while True:
            self._index = (self._index + 1) % count
            if self._index == 0:
                self._cw -= self._gcd
                if self._cw < 0:
                    self._cw = self._max
            if self._weights[self._index] > self._cw:
                self._last = self._members[self._index]
                return self._last
