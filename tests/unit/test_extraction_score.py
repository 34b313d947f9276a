"""bench.extraction_score: the dev set's token rule and the P/R/F1 definition."""

import pytest

from bench.extraction_score import PageScore, aggregate, score_page, tokenize

pytestmark = pytest.mark.unit


def test_cjk_characters_are_tokens_and_words_are_runs():
    assert tokenize("abc中文 def_1, かな!") == ["abc", "中", "文", "def_1", "か", "な"]
    assert tokenize("Привет, мир") == ["Привет", "мир"]
    assert tokenize("") == []


def test_tokens_are_case_sensitive():
    assert score_page("Word", "word") == PageScore(tp=0, fp=1, fn=1)


def test_page_score_is_a_bag_intersection():
    score = score_page("a a b c", "a b b d")
    assert (score.tp, score.fp, score.fn) == (2, 2, 2)
    assert score.precision == pytest.approx(0.5)
    assert score.recall == pytest.approx(0.5)


def test_precision_ignores_pages_without_output_but_recall_counts_them():
    group = aggregate([score_page("a b", "a b"), score_page("", "a b c d")])
    assert group.pages == 2
    assert group.empty == 1
    assert group.precision == pytest.approx(1.0)
    assert group.recall == pytest.approx(0.5)
    assert group.f1 == pytest.approx(2 * 1.0 * 0.5 / 1.5)


def test_empty_group_scores_zero():
    assert aggregate([]).f1 == 0.0
