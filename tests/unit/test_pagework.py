"""Page work in a process pool: how big the pool is, what one page's work returns, how pages are batched."""

from __future__ import annotations

import pytest
from twisted.internet.defer import Deferred

from spiders.pipelines.extract import ExtractPipeline
from spiders.pipelines.metadata import MetadataPipeline
from spiders.pipelines.pagework import PageBatcher, page_work, page_work_batch, pool_size
from tests.unit.test_metadata import NEWS

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("setting", "host_workers", "cores", "expected"), [
    (0, 1, 8, 0), (3, 4, 2, 3),  # explicit
    (-1, 1, 2, 1), (-1, 2, 2, 0), (-1, 2, 3, 1), (-1, 0, 1, 0), (-1, 4, 4, 0),  # more than one core per worker
])
def test_pool_size(setting, host_workers, cores, expected):
    assert pool_size(setting, host_workers, cores) == expected


def test_page_work_gives_what_the_two_pipelines_give():
    url = "https://daily.test/2026/03/storm"
    result = page_work(NEWS, url, ["text", "markdown", "metadata"])
    item = ExtractPipeline().process_item(MetadataPipeline().process_item({"url": url, "_html": NEWS}))
    assert result["metadata"] == item["metadata"] and result["broken"] == 1
    assert {k: result["extracted"][k] for k in ("text", "markdown", "title", "published")} == {
        k: item.get(k) for k in ("text", "markdown", "title", "published")}
    only_text = page_work(NEWS, url, ["text"])
    assert "metadata" not in only_text and "markdown" not in only_text["extracted"]


def test_page_work_answers_only_the_fields_the_item_takes():
    url = "https://daily.test/2026/03/storm"
    assert set(page_work(NEWS, url, ["text"])["extracted"]) == {"text", "title", "published"}
    assert set(page_work(NEWS, url, ["markdown"])["extracted"]) == {"markdown", "title", "published"}
    assert page_work_batch([(NEWS, url, ["text"]), ("", None, [])]) == [page_work(NEWS, url, ["text"]),
                                                                      page_work("", None, [])]


class Turns:
    """A reactor's callLater(0, f): f runs when the test ends the turn."""

    def __init__(self):
        self.pending = []

    def __call__(self, delay, f):
        assert delay == 0
        self.pending.append(f)

    def end(self):
        pending, self.pending = self.pending, []
        for f in pending:
            f()


def test_pages_of_one_turn_go_as_one_job_and_each_gets_its_own_answer():
    jobs = []

    def submit(pages):
        jobs.append((pages, Deferred()))
        return jobs[-1][1]

    turns = Turns()
    batcher = PageBatcher(submit, turns, batch=3)
    answers = []
    for n in range(5):
        batcher.add((f"<p>{n}</p>", f"u{n}", ["text"])).addCallback(answers.append)
    assert [len(pages) for pages, _ in jobs] == [3]  # a full batch leaves at once
    turns.end()
    assert [len(pages) for pages, _ in jobs] == [3, 2]  # the rest at the end of the turn
    turns.end()
    assert len(jobs) == 2  # nothing left: no empty job
    jobs[1][1].callback([{"n": 3}, {"n": 4}])
    jobs[0][1].callback([{"n": 0}, {"n": 1}, {"n": 2}])
    assert answers == [{"n": 3}, {"n": 4}, {"n": 0}, {"n": 1}, {"n": 2}]  # in any order, each its own


def test_a_failed_job_or_a_refused_submit_fails_each_of_its_pages():
    job = Deferred()
    calls = []

    def submit(pages):
        calls.append(pages)
        if len(calls) == 2:
            raise RuntimeError("pool is broken")
        return job

    turns = Turns()
    batcher = PageBatcher(submit, turns, batch=10)
    failures = []
    first = [batcher.add(("<p/>", None, [])) for _ in range(2)]
    turns.end()
    second = batcher.add(("<p/>", None, []))
    turns.end()
    job.errback(ValueError("died"))
    for done in [*first, second]:
        done.addErrback(lambda failure: failures.append(failure.type))
    assert failures == [ValueError, ValueError, RuntimeError]
