"""``crawlfleet schedule add | list | show | remove | pause | resume``: crawls on a cron schedule.

A schedule is stored in Redis (``messaging.schedules``) and fired by whichever master leads; these commands read and
change it directly, the way the manager's ``/api/schedules`` does. ``add`` checks the name, the cron expression
(croniter), the time zone (zoneinfo) and the crawl request (the Kafka monitor's schemas) before storing anything.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deploy.cli_messaging import read_messages
from messaging import clients
from messaging.schedules import DEFAULT_TZ, InvalidSchedule, Schedule, ScheduleStore, local_time
from messaging.settings import load

console = Console()


def _store() -> tuple[ScheduleStore, Any]:
    settings = load()
    return ScheduleStore(clients.redis_client(settings)), settings


def when(seconds: float | None, tz: str) -> str:
    return local_time(seconds, tz)


def _get(store: ScheduleStore, name: str) -> Schedule:
    found = store.get(name)
    if found is None:
        raise click.ClickException(f"there is no schedule {name!r} (crawlfleet schedule list)")
    return found


@click.group("schedule")
def schedule() -> None:
    """Crawls on a cron schedule, fired by the leading master (exactly once per due time, also across failover)."""


@schedule.command("add")
@click.argument("name")
@click.argument("source", metavar="FILE", type=click.File("r", encoding="utf-8"))
@click.option("--cron", "cron", required=True,
              help='When: five fields "minute hour day month weekday" (e.g. "0 3 * * *"), or six with seconds first.')
@click.option("--tz", default=DEFAULT_TZ, show_default=True, help="The time zone the expression is read in.")
@click.option("--replace", is_flag=True, help="Replace an existing schedule's expression, zone and request (its "
                                              "firings and counts are kept).")
@click.option("--json", "as_json", is_flag=True, help="Print the schedule as JSON.")
def add(name: str, source: Any, cron: str, tz: str, replace: bool, as_json: bool) -> None:
    """Add schedule NAME: the crawl request in FILE (JSON, as `crawlfleet submit` takes; - for stdin) is submitted
    at every due time, as a crawl of its own: NAME-<due time, UTC>."""
    messages = read_messages(source.read())
    if len(messages) != 1:
        raise click.ClickException(f"FILE holds {len(messages)} requests; a schedule submits exactly one")
    store, settings = _store()
    try:
        found = store.add(name, cron, tz, messages[0], max_bytes=settings.max_message_bytes, replace=replace)
    except InvalidSchedule as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(found.to_json(), sort_keys=True, ensure_ascii=False))
        return
    upcoming = found.to_json()["next"]
    console.print(escape(f"schedule {name} {'replaced' if replace else 'added'}: {cron} ({found.tz}); next firing "
                         f"{when(upcoming['due'] if upcoming else None, found.tz)} as crawl "
                         f"{upcoming['crawlid'] if upcoming else '–'}"), highlight=False)


@schedule.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the schedules as JSON lines.")
def list_command(as_json: bool) -> None:
    """Every schedule: expression, state, next and last firing with their crawl ids, missed due times."""
    store, _ = _store()
    schedules = store.all()
    if as_json:
        for found in schedules:
            click.echo(json.dumps(found.to_json(), sort_keys=True, ensure_ascii=False))
        return
    table = Table(title="schedules")
    for column in ("name", "cron", "tz", "state", "next firing", "last firing", "missed"):
        table.add_column(column, overflow="fold")
    for found in schedules:
        data = found.to_json()
        table.add_row(*map(escape, (found.name, found.cron, found.tz, data["state"], _firing(data["next"], found.tz),
                                    _last(data["last"], found.tz), str(found.missed))))
    console.print(table if schedules else "no schedules (crawlfleet schedule add)")


def _firing(firing: dict[str, Any] | None, tz: str) -> str:
    return "–" if firing is None else f"{when(firing['due'], tz)}\n{firing['crawlid']}"


def _last(last: dict[str, Any] | None, tz: str) -> str:
    if last is None:
        return "–"
    late = f", {last['late']:.0f} s late" if last.get("late", 0) > 5 else ""
    return f"{when(last['due'], tz)}\n{last['crawlid']} ({last['outcome']}{late})"


@schedule.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the schedule and its history as JSON.")
def show(name: str, as_json: bool) -> None:
    """One schedule: its request, next and last firing, and its latest firings."""
    store, settings = _store()
    found = _get(store, name)
    data = found.to_json()
    data["history"] = store.history(name, settings.schedule_history)
    if as_json:
        click.echo(json.dumps(data, sort_keys=True, ensure_ascii=False))
        return
    console.print(escape(f"schedule {name}: {found.cron} ({found.tz}), {data['state']}"
                         + (f" since {when(found.paused, found.tz)}" if found.paused else "")), highlight=False)
    console.print(escape(f"next firing: {_firing(data['next'], found.tz)}".replace("\n", " as crawl ")),
                  highlight=False)
    console.print(escape(f"last firing: {_last(data['last'], found.tz)}".replace("\n", " as crawl ")),
                  highlight=False)
    console.print(f"missed (older than the grace period): {found.missed}")
    console.print(escape("request: " + json.dumps(data["request"], sort_keys=True, ensure_ascii=False)),
                  highlight=False, soft_wrap=True)
    table = Table(title="latest firings")
    for column in ("due", "crawl", "fired", "late (s)", "outcome"):
        table.add_column(column, overflow="fold")
    for entry in data["history"]:
        table.add_row(*map(escape, (when(entry.get("due"), found.tz), entry.get("crawlid", "–"),
                                    when(entry.get("fired"), found.tz), str(entry.get("late", "")),
                                    entry.get("outcome", ""))))
    console.print(table)


def _change(name: str, action: str, done: str) -> None:
    store, _ = _store()
    if not getattr(store, action)(name):
        raise click.ClickException(f"there is no schedule {name!r} (crawlfleet schedule list)")
    console.print(escape(f"schedule {name} {done}"), highlight=False)


@schedule.command("remove")
@click.argument("name")
def remove(name: str) -> None:
    """Remove a schedule (the crawls it started are left as they are)."""
    _change(name, "remove", "removed")


@schedule.command("pause")
@click.argument("name")
def pause(name: str) -> None:
    """Pause a schedule: due times pass without firing (nor count as missed) until it is resumed."""
    _change(name, "pause", "paused")


@schedule.command("resume")
@click.argument("name")
def resume(name: str) -> None:
    """Resume a paused schedule from now on (the due times it passed while paused do not fire)."""
    _change(name, "resume", "resumed")
