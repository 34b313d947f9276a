"""``crawlfleet kafka-monitor | redis-monitor | submit | info | stats | site | stop``: the messaging commands
(``pause`` and ``resume``: :mod:`deploy.cli_pause`).

The request commands validate locally with the same schemas as the Kafka monitor (an immediate reason for a bad
request), send to the incoming topic and, when they expect an answer, read the outbound topic from the end offsets
taken before sending until the answer with their uuid arrives, or ``--timeout`` passes. A timeout is not a failure:
the request is in Kafka and may still take effect, so the command says "sent; not confirmed yet", where the request
waits and how to check (:mod:`deploy.cli_unconfirmed`), with exit code 3. Refused or failed: exit code 1.
Human output is rich tables on stdout; ``--json`` prints the answers as JSON instead.
"""

from __future__ import annotations

import json
import sys
import uuid as uuidlib
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deploy.cli_errors import EXIT_UNCONFIRMED, Unconfirmed, require_kafka
from deploy.cli_unconfirmed import how_to_check, unconfirmed_message
from messaging import clients, modules, request_kinds
from messaging.answers import AnswerTimeout, AnswerWaiter
from messaging.service import setup_logging
from messaging.settings import load
from messaging.validation import CRAWL, Rejected, parse_request
from messaging.waits import describe

console = Console()
errors = Console(stderr=True)
DEFAULT_USER = "cli"


def _timeout_option(function: Any) -> Any:
    return click.option("--timeout", type=float, default=None,
                        help="Seconds to wait for the answer (default: CRAWLFLEET_ANSWER_TIMEOUT, 30).")(function)


def _json_option(function: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")(function)


def _user_option(function: Any) -> Any:
    return click.option("--userid", default=DEFAULT_USER, show_default=True, help="User id of the request.")(function)


# --- monitors ----------------------------------------------------------------------------------------------------
@click.command("kafka-monitor")
def kafka_monitor() -> None:
    """Consume crawlfleet.incoming: validate, route into Redis, reject to crawlfleet.failed (run several)."""
    from messaging.kafka_monitor.monitor import run

    settings = load()
    setup_logging(settings.log_level)
    run(settings)


@click.command("redis-monitor")
def redis_monitor() -> None:
    """Answer info, stats, site-config, stop, pause and resume requests on crawlfleet.outbound (run several)."""
    from messaging.redis_monitor.monitor import run

    settings = load()
    setup_logging(settings.log_level)
    run(settings)


# --- asking ------------------------------------------------------------------------------------------------------
def ask(request: dict[str, Any], timeout: float | None) -> dict[str, Any]:
    """Validate, send, wait: the answer; a ClickException (exit code 1) when refused before sending, or
    :class:`Unconfirmed` (exit code 3) when sent and not answered in time."""
    settings = load()
    request_kinds.use_settings(settings)
    request.setdefault("uuid", uuidlib.uuid4().hex)
    try:
        kind = parse_request(request, settings.max_message_bytes).kind
    except Rejected as rejection:
        raise click.ClickException(f"invalid request: {rejection.reason}") from None
    from messaging.kafka_monitor.monitor import topic_partitions

    require_kafka(settings)
    clients.ensure_topics(settings, topic_partitions(settings))
    producer = clients.kafka_producer(settings)
    wait = timeout if timeout is not None else settings.answer_timeout
    try:
        with AnswerWaiter(settings) as waiter:
            producer.send(settings.topic_incoming, request).get(timeout=30)
            found = waiter.wait([request["uuid"]], wait)
    except AnswerTimeout:
        raise Unconfirmed(unconfirmed_message(settings, kind, request, wait)) from None
    finally:
        producer.close(timeout=10)
    return found[request["uuid"]]


def _finish(result: dict[str, Any], as_json: bool, render: Any) -> None:
    if as_json:
        click.echo(json.dumps(result, ensure_ascii=False, sort_keys=True))
    elif result.get("status") in ("ok", "accepted"):
        render(result)
    if result.get("status") not in ("ok", "accepted"):
        raise click.ClickException(f"{result.get('status')}: {result.get('reason', 'no reason given')}")


@click.command("info")
@click.argument("crawlid")
@_user_option
@_timeout_option
@_json_option
def info(crawlid: str, userid: str, timeout: float | None, as_json: bool) -> None:
    """How far a crawl has got: pending, queued and leased tasks by domain and job, items stored."""
    result = ask({"action": "info", "userid": userid, "crawlid": crawlid}, timeout)
    if result.get("status") == "ok" and _unknown(result):
        if as_json:
            click.echo(json.dumps(result, ensure_ascii=False, sort_keys=True))
        raise click.ClickException(f"no crawl {crawlid}: neither Redis nor MongoDB knows it (a typo? `crawlfleet "
                                   f"info` takes the crawlid of a submitted crawl)")
    _finish(result, as_json, _render_info)


def _unknown(result: dict[str, Any]) -> bool:
    """An info answer about nothing: no record, no task anywhere, no item stored."""
    return not result.get("exists") and not any(result.get(n) for n in ("pending", "queued", "leased")) \
        and not result.get("items_in_mongodb")


def _render_info(result: dict[str, Any]) -> None:
    console.print(f"crawl [bold]{result['crawlid']}[/] ({result.get('spider_type') or '?'}, "
                  f"{result.get('state') or 'unknown'}), owner {result.get('owner') or '?'}")
    parked = f"  parked {result['parked']}" if result.get("parked") or result.get("paused") else ""
    console.print(f"pending {result['pending']}  queued {result['queued']}  leased {result['leased']}{parked}  "
                  f"domains {result['total_domains']}  pages {result['pages']}  items {result['items']} "
                  f"(MongoDB: {result.get('items_in_mongodb')})  enqueued {result['enqueued']}")
    if result["domains"]:
        table = Table(title="domains")
        for column in ("domain", "pending", "queued", "leased"):
            table.add_column(column, justify="right" if column != "domain" else "left")
        for domain, counts in result["domains"].items():
            table.add_row(domain, str(counts["pending"]), str(counts["queued"]), str(counts["leased"]))
        console.print(table)
    if result["jobs"]:
        table = Table(title="jobs")
        for column in ("job", "queued", "leased", "domains"):
            table.add_column(column)
        for job, counts in result["jobs"].items():
            table.add_row(job, str(counts["queued"]), str(counts["leased"]), ", ".join(counts["domains"]))
        console.print(table)
    if result.get("revisit"):
        _render_revisit(result["revisit"])
    for wait in result.get("waiting") or []:
        console.print(f"[yellow]waiting[/] {escape(describe(wait))}")


def _render_revisit(revisit: dict[str, Any]) -> None:
    console.print(f"revisits: scheduled {revisit['scheduled']}  due {revisit['due']}  overdue {revisit['overdue']}  "
                  f"mean interval {revisit['mean_interval']} s  changed {revisit['changed']}  unchanged "
                  f"{revisit['unchanged']} (304: {revisit['not_modified']})  failed {revisit['failed']}")


@click.command("revisits")
@click.argument("crawlid")
@_json_option
def revisits(crawlid: str, as_json: bool) -> None:
    """A revisiting crawl's schedule, read from Redis: due, overdue, mean interval, changed and unchanged counts."""
    from messaging.redis_monitor.plugins.info import revisit_summary

    summary = revisit_summary(clients.redis_client(load()), crawlid)
    if summary is None:
        raise click.ClickException(f"crawl {crawlid} has no revisit schedule")
    if as_json:
        click.echo(json.dumps(summary, sort_keys=True))
    else:
        _render_revisit(summary)


@click.command("stats")
@click.argument("module", default="all",
                type=click.Choice([modules.ALL, *modules.STATS_MODULES]))
@_user_option
@_timeout_option
@_json_option
def stats(module: str, userid: str, timeout: float | None, as_json: bool) -> None:
    """Counters per plugin and window, and alive hosts, of one module or all (seed tables 4-4 to 4-6)."""
    result = ask({"stats": module, "userid": userid}, timeout)
    _finish(result, as_json, _render_stats)


WINDOW_NAMES = {"60": "1m", "300": "5m", "900": "15m", "3600": "1h", "86400": "24h", "lifetime": "total"}
EXTRAS = {"seeds": "tasks in seeds", "workers": "workers registered", "managers": "managers"}


def _window_name(window: str) -> str:
    if window.startswith("step") and window[4:].isdigit():
        return "hour" if window == "step3600" else f"{int(window[4:]) // 60}m period"
    return WINDOW_NAMES.get(window, f"{window}s" if window.isdigit() else window)


def _window_order(window: str) -> tuple[int, int]:
    if window.isdigit():
        return 0, int(window)
    return (1, int(window[4:])) if window.startswith("step") and window[4:].isdigit() else (2, 0)


def _running(module: str, data: dict[str, Any]) -> str:
    """Where the module runs, in words: its live hosts, or that none beats."""
    alive = data["alive"]
    if not alive:
        what = "no worker's heartbeat" if module == "crawler" else "no heartbeat"
        return f"not running anywhere ({what} in Redis)"
    hosts = []
    for ip, entry in alive.items():
        count = f"{entry['workers']} worker{'s' if entry['workers'] != 1 else ''} on " if "workers" in entry else ""
        hosts.append(f"{count}{ip}" + (f" ({entry['host']})" if entry.get("host") else ""))
    return "running: " + ", ".join(hosts)


def _render_stats(result: dict[str, Any]) -> None:
    windows_seen: set[str] = set()
    for module, data in result["modules"].items():
        extra = "".join(f"; {EXTRAS[name]} {data[name]}" for name in EXTRAS if name in data)
        console.print(f"[bold]{escape(module)}[/]: {escape(_running(module, data))}{escape(extra)}", highlight=False)
        if not data["plugins"]:
            continue
        windows = sorted({w for counts in data["plugins"].values() for w in counts}, key=_window_order)
        windows_seen.update(windows)
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("counted", overflow="fold")  # folded on a narrow terminal, never cut
        for window in windows:
            name = _window_name(window)
            width = max(len(name), *(len(str(c.get(window, ""))) for c in data["plugins"].values()))
            table.add_column(name, justify="right", no_wrap=True, min_width=width)
        for plugin, counts in data["plugins"].items():
            table.add_row(plugin, *(str(counts.get(window, "")) for window in windows))
        console.print(table)
    if windows_seen:
        console.print("Columns: events in the last 1m, 5m, 15m, 1h, 24h (sliding windows); hour: since the top of "
                      "this hour; total: since the counters began. The crawler's rows: responses by spider type and "
                      "HTTP status (error: none came), and its other page counts.", highlight=False)


@click.command("stop")
@click.argument("crawlid")
@_user_option
@_timeout_option
@_json_option
def stop(crawlid: str, userid: str, timeout: float | None, as_json: bool) -> None:
    """Stop a crawl: purge its tasks from seeds, queues and leases, and refuse its new ones."""
    result = ask({"action": "stop", "userid": userid, "crawlid": crawlid}, timeout)

    def render(answer: dict[str, Any]) -> None:
        purged = answer["purged"]
        console.print(f"stopped crawl {answer['crawlid']}: purged {answer['total']} tasks (seeds {purged['seeds']}, "
                      f"queues {purged['queues']}, leases {purged['leases']})")

    _finish(result, as_json, render)


# --- submit ------------------------------------------------------------------------------------------------------
def read_messages(text: str) -> list[Any]:
    """One JSON object, a JSON array of them, or JSON lines; an unparsable line is kept as text (and rejected)."""
    stripped = text.strip()
    if not stripped:
        return []
    try:
        whole = json.loads(stripped)
    except ValueError:
        return [_line(line) for line in stripped.splitlines() if line.strip()]
    return whole if isinstance(whole, list) else [whole]


def _line(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return line


@click.command("submit")
@click.argument("source", type=click.File("r", encoding="utf-8"))
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait for each request's answer (adds a uuid): accepted, duplicate, rejected; --no-wait only sends.")
@_timeout_option
@_json_option
def submit(source: Any, wait: bool, timeout: float | None, as_json: bool) -> None:
    """Send requests from FILE (or - for stdin): JSON, a JSON array, or JSON lines; one line per request says what
    came of it (accepted, duplicate, rejected with the reason, or sent but not confirmed yet). Exit 1 if any is
    rejected, else 3 if any is not confirmed within the timeout (it may still take effect)."""
    settings = load()
    outcomes: list[dict[str, Any]] = []
    valid: list[tuple[int, dict[str, Any]]] = []
    for number, message in enumerate(read_messages(source.read()), start=1):
        if wait and isinstance(message, dict):
            message.setdefault("uuid", uuidlib.uuid4().hex)
        try:
            request = parse_request(message if isinstance(message, dict) else str(message), settings.max_message_bytes)
        except Rejected as rejection:
            outcomes.append({"number": number, "status": "rejected", "reason": rejection.reason})
            continue
        valid.append((number, request.data))
        outcomes.append({"number": number, "status": "sent", "kind": request.kind, "uuid": request.uuid,
                         "crawlid": request.data.get("crawlid")})
    if valid:
        _send(settings, valid, outcomes, wait, timeout if timeout is not None else settings.answer_timeout)
    _report_submit(outcomes, as_json)
    if any(outcome["status"] not in (*DONE, UNCONFIRMED) for outcome in outcomes):
        sys.exit(1)
    if any(outcome["status"] == UNCONFIRMED for outcome in outcomes):
        sys.exit(EXIT_UNCONFIRMED)


def _send(settings: Any, valid: list[tuple[int, dict[str, Any]]], outcomes: list[dict[str, Any]], wait: bool,
          timeout: float) -> None:
    from messaging.kafka_monitor.monitor import topic_partitions

    require_kafka(settings)
    clients.ensure_topics(settings, topic_partitions(settings))
    producer = clients.kafka_producer(settings)
    waiter = AnswerWaiter(settings) if wait else None
    try:
        for _, request in valid:
            producer.send(settings.topic_incoming, request)
        producer.flush(timeout=60)
        if waiter is None:
            return
        # Only crawl requests and rejections are answered by the Kafka monitor itself; the other kinds are
        # answered later by the Redis monitor, which --wait also accepts as "stored".
        wanted = [request["uuid"] for _, request in valid]
        try:
            found = waiter.wait(wanted, timeout)
        except AnswerTimeout as exc:
            found = exc.found
        by_number = {outcome["number"]: outcome for outcome in outcomes}
        for number, request in valid:
            answer = found.get(request["uuid"])
            outcome = by_number[number]
            if answer is None:  # in Kafka all the same: it may take effect later
                outcome["status"] = UNCONFIRMED
                outcome["reason"] = f"no answer within {timeout:g}s: {how_to_check(outcome['kind'], request)}"
            elif answer.get("kind") != CRAWL and answer.get("status") == "ok":
                outcome["status"] = "stored"
            else:
                outcome["status"] = answer.get("status")
                if answer.get("reason"):
                    outcome["reason"] = answer["reason"]
    finally:
        producer.close(timeout=10)
        if waiter is not None:
            waiter.close()


DONE = ("sent", "accepted", "duplicate", "stored")
UNCONFIRMED = "sent; not confirmed yet"


def _report_submit(outcomes: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        for outcome in outcomes:
            click.echo(json.dumps(outcome, ensure_ascii=False, sort_keys=True))
        return
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome["status"]] = counts.get(outcome["status"], 0) + 1
        what = " ".join(str(outcome[name]) for name in ("kind", "crawlid") if outcome.get(name))
        line = f"request {outcome['number']}: {outcome['status']}" + (f" ({what})" if what else "")
        if outcome["status"] in DONE:
            console.print(escape(line), highlight=False, soft_wrap=True)
        else:
            reason = outcome.get("reason", "no reason given")
            errors.print(escape(f"{line}: {reason}"), highlight=False, soft_wrap=True)
    console.print(", ".join(f"{count} {status}" for status, count in sorted(counts.items())) or "no requests")


COMMANDS = (kafka_monitor, redis_monitor, revisits)  # the request kinds' commands: messaging.request_kinds
