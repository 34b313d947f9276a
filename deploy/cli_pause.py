"""``crawlfleet pause CRAWL`` / ``crawlfleet resume CRAWL``: the request kinds ``pause`` and ``resume``.

Both are sent through Kafka like ``stop`` (:func:`deploy.cli_messaging.ask`: validated here, answered by a Redis
monitor, "sent; not confirmed yet" with exit code 3 when the answer does not come in time). While a crawl is paused
nothing of it is fetched — workers hand back the tasks they hold within a moment — and nothing of it is lost: its
tasks wait parked until it is resumed (:mod:`messaging.pause`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from deploy.cli_messaging import _finish, _json_option, _timeout_option, _user_option, ask, console


def _since(seconds: float | None) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if seconds else "?"


@click.command("pause")
@click.argument("crawlid")
@_user_option
@_timeout_option
@_json_option
def pause(crawlid: str, userid: str, timeout: float | None, as_json: bool) -> None:
    """Pause a crawl: nothing of it is fetched until it is resumed; its tasks wait, parked, none is lost."""
    result = ask({"action": "pause", "userid": userid, "crawlid": crawlid}, timeout)

    def render(answer: dict[str, Any]) -> None:
        what = "paused" if answer.get("changed") else "was already paused"
        console.print(f"crawl {answer['crawlid']} {what} (since {_since(answer.get('since'))}); "
                      f"{answer.get('parked', 0)} tasks parked out of seeds, workers park what they hold")

    _finish(result, as_json, render)


@click.command("resume")
@click.argument("crawlid")
@_user_option
@_timeout_option
@_json_option
def resume(crawlid: str, userid: str, timeout: float | None, as_json: bool) -> None:
    """Resume a paused crawl where it was: its parked tasks go back to seeds and to the workers' queues."""
    result = ask({"action": "resume", "userid": userid, "crawlid": crawlid}, timeout)

    def render(answer: dict[str, Any]) -> None:
        if answer.get("changed"):
            console.print(f"crawl {answer['crawlid']} resumed (paused since {_since(answer.get('since'))}); "
                          f"{answer.get('parked', 0)} parked tasks back in seeds")
        else:
            console.print(f"crawl {answer['crawlid']} was not paused (running)")

    _finish(result, as_json, render)
