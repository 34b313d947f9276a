"""Page work in a process pool: how big the pool is, what one page's work returns, how pages are batched."""

from __future__ import annotations

import io
import os

import pytest
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from deploy.fleet import FleetSpec, plan, with_host_workers
from messaging.settings import SETTINGS
from spiders.pipelines.extract import ExtractPipeline
from spiders.pipelines.metadata import MetadataPipeline
from spiders.pipelines.pagepool import MAX_RESTARTS, PagePool, PageProcess
from spiders.pipelines.pageproc import _read_frame, frame, serve
from spiders.pipelines.pagework import AUTO_MAX, PageBatcher, page_work, page_work_batch, pool_size, usable_cores
from tests.unit.test_metadata import NEWS

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("setting", "host_workers", "cores", "expected"), [
    (0, 1, 8, 0), (3, 4, 2, 3),  # explicit
    (-1, 1, 2, 1), (-1, 2, 2, 0), (-1, 2, 3, 1), (-1, 0, 1, 0), (-1, 4, 4, 0),  # more than one core per worker
    (-1, 1, 1, 0), (-1, 4, 2, 0), (-1, 2, 8, 3), (-1, 3, 8, 2), (-1, 3, 4, 1),  # the worker's share less its own
    (-1, 1, 64, AUTO_MAX),  # no more than a reactor can keep busy
])
def test_pool_size(setting, host_workers, cores, expected):
    assert pool_size(setting, host_workers, cores) == expected


def test_pool_size_defaults_to_this_hosts_usable_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert usable_cores() == 3 and pool_size(-1, 1) == 2 and pool_size(-1, 2) == 1 and pool_size(-1, 3) == 0


def test_the_registry_default_is_auto():
    assert SETTINGS["CRAWLFLEET_PAGE_PROCESSES"].default == -1 and SETTINGS["CRAWLFLEET_HOST_WORKERS"].default == 1


def test_a_local_fleet_tells_its_workers_how_many_share_the_host():
    processes = plan(FleetSpec(workers={"list": 2, "universal": 3}, masters=2), "h", {})
    assert with_host_workers({"A": "1"}, processes) == {"A": "1", "CRAWLFLEET_HOST_WORKERS": "5"}
    assert with_host_workers({"CRAWLFLEET_HOST_WORKERS": "8"}, processes) == {"CRAWLFLEET_HOST_WORKERS": "8"}


def test_a_pool_process_answers_frames_in_order_and_ends_with_its_input():
    pages = [[(NEWS, "https://daily.test/a", ["text"])], [("<p>x</p>", None, ["markdown"]), ("", None, [])]]
    answers = io.BytesIO()
    assert serve(io.BytesIO(b"".join(frame(batch) for batch in pages)), answers) == 2
    stream = io.BytesIO(answers.getvalue())
    assert _read_frame(stream) == {"pid": os.getpid()}
    assert [_read_frame(stream), _read_frame(stream)] == [page_work_batch(batch) for batch in pages]
    assert _read_frame(stream) is None


def test_answers_split_anyhow_across_reads_reach_their_jobs_in_order():
    process = PageProcess(pool=None)
    process.transport = type("T", (), {"write": lambda self, data: None})()
    ready = []
    process.ready.addCallback(ready.append)
    jobs = [process.send([("<p/>", None, [])]) for _ in range(3)]
    answers = []
    for job in jobs:
        job.addCallback(answers.append)
    stream = frame({"pid": 7}) + b"".join(frame([{"n": n}]) for n in range(3))
    for start in range(0, len(stream), 5):
        process.outReceived(stream[start:start + 5])
    assert ready == [7] and answers == [[{"n": 0}], [{"n": 1}], [{"n": 2}]] and not process.jobs


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


class FakeTransport:
    def __init__(self, pid: int) -> None:
        self.pid, self.pipes, self.written, self.stdin_closed = pid, {}, [], False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def closeStdin(self) -> None:
        self.stdin_closed = True


class FakeReactor:
    """spawnProcess hands the protocol a transport; nothing runs."""

    def __init__(self) -> None:
        self.spawned: list[PageProcess] = []

    def spawnProcess(self, protocol: PageProcess, *args: object, **kwargs: object) -> None:
        protocol.transport = FakeTransport(100 + len(self.spawned))
        protocol.pid = protocol.transport.pid
        protocol.outReceived(frame({"pid": protocol.pid}))
        self.spawned.append(protocol)


def test_a_process_is_recycled_after_its_share_of_pages_and_no_page_is_lost():
    reactor = FakeReactor()
    pool = PagePool(1, reactor=reactor, recycle_after=4)
    pool._spawn()
    first = reactor.spawned[0]
    page = ("<p>x</p>", None, [])
    answers: list[object] = []
    for _ in range(2):  # 4 pages: its share; the second job makes it retire
        pool.submit([page, page]).addCallback(answers.append)
    assert first.retiring and first.transport.stdin_closed and len(reactor.spawned) == 2 and pool.recycled == 1
    second = reactor.spawned[1]
    pool.submit([page]).addCallback(answers.append)  # every page from now on goes to its successor
    assert len(second.jobs) == 1 and len(first.jobs) == 2
    first.outReceived(frame([{"n": 0}, {"n": 1}]) + frame([{"n": 2}, {"n": 3}]))  # it answers what it holds
    first.processEnded(Failure(RuntimeError("exited 0")))  # then ends at the end of its stdin
    assert answers == [[{"n": 0}, {"n": 1}], [{"n": 2}, {"n": 3}]]
    assert pool.processes == [second] and len(reactor.spawned) == 2 and pool.in_reactor == 0  # not a death
    second.outReceived(frame([{"n": 4}]))
    assert answers[-1] == [{"n": 4}] and pool.restarts_left == MAX_RESTARTS
