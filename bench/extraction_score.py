"""Bag-of-tokens scoring of extracted main text, as defined by the extraction-dev set's README.

Tokens are runs of ``\\w+``, except that every CJK ideograph or kana is a token by itself (Chinese is scored per
character); matching is case-sensitive. Per page, true positives are the multiset intersection of extracted and
reference tokens. Over a group of pages, precision is the mean of tp/(tp+fp) over pages *with output*, recall
is the mean of tp/(tp+fn) over all pages (with a non-empty reference), and F1 = 2PR/(P+R).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["GroupScore", "PageScore", "aggregate", "score_page", "tokenize"]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_TOKEN = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")


def tokenize(text: str) -> list[str]:
    """Split text into scoring tokens: single CJK characters and ``\\w+`` runs of everything else."""
    return _TOKEN.findall(text or "")


@dataclass(frozen=True)
class PageScore:
    tp: int
    fp: int
    fn: int

    @property
    def has_output(self) -> bool:
        return self.tp + self.fp > 0

    @property
    def has_reference(self) -> bool:
        return self.tp + self.fn > 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.has_output else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.has_reference else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score_page(extracted: str, reference: str) -> PageScore:
    """Compare one page's extracted text with its reference text."""
    got, want = Counter(tokenize(extracted)), Counter(tokenize(reference))
    tp = sum((got & want).values())
    return PageScore(tp=tp, fp=sum(got.values()) - tp, fn=sum(want.values()) - tp)


@dataclass(frozen=True)
class GroupScore:
    pages: int
    empty: int
    precision: float
    recall: float

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def aggregate(scores: Iterable[PageScore]) -> GroupScore:
    """Macro-average page scores into P, R and F1 (see the module docstring)."""
    scores = list(scores)
    with_output = [s for s in scores if s.has_output]
    with_reference = [s for s in scores if s.has_reference]
    precision = sum(s.precision for s in with_output) / len(with_output) if with_output else 0.0
    recall = sum(s.recall for s in with_reference) / len(with_reference) if with_reference else 0.0
    return GroupScore(pages=len(scores), empty=len(scores) - len(with_output), precision=precision, recall=recall)
