"""Repeated runs of lines: a carousel's cloned slides, a product's variant copies of its badges and specs."""

from __future__ import annotations

from collections import Counter

from spiders.extraction.dom import Block
from spiders.extraction.lines import is_cell

__all__ = ["without_repeated_runs"]


def without_repeated_runs(selected: list[Block], length: int) -> list[Block]:
    """Drop each run of ``length`` consecutive selected lines that repeats, line for line, an earlier run of the
    selection: a slider's cloned slides (the endless scroll shows its four "Save Time | A complete meal in
    seconds." cards twice), a poll's answer scale under every question, a menu printed twice (desktop and mobile
    copies). The long lines of such copies already go as repeated blocks; this takes the short ones, which no
    single line can be judged by (a comparison table repeats its labels, one at a time). Table cells never make
    a run (a feature matrix's "Yes", "—"). Linear: one hash of ``length`` lines per line."""
    texts = ["" if is_cell(block) else block.text for block in selected]
    counts = Counter(texts)
    counts.pop("", None)
    if not counts or max(counts.values()) < 2:
        return selected
    twice = {text for text, count in counts.items() if count > 1}  # lines standing twice or more
    first: dict[tuple[str, ...], int] = {}
    dropped: set[int] = set()
    i = 0
    while i + length <= len(texts):
        key = tuple(texts[i : i + length])
        if not all(text in twice for text in key):  # a table's cells never make a run, nor a line written once
            i += 1
            continue
        start = first.setdefault(key, i)
        if start + length <= i:  # an earlier, separate copy of the same run
            dropped.update(range(i, i + length))
            i += length
        else:
            i += 1
    return [block for k, block in enumerate(selected) if k not in dropped] if dropped else selected
