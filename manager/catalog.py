"""The spiders of the installed project, as ``scrapy list`` prints them (the manager never imports spider code).

Run once, asynchronously, in the project directory with the manager's environment; the answer is cached for the
manager's life (the project is installed, not deployed: it changes only with a new release and a restart). A
deployed project's spiders are listed per version by :mod:`manager.projects`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from twisted.internet import defer, utils

logger = logging.getLogger(__name__)


class SpiderListError(RuntimeError):
    pass


class SpiderCatalog:
    def __init__(self, project_dir: Path, env: dict[str, str], reactor: Any = None) -> None:
        self.project_dir = project_dir
        self.env = env
        self.reactor = reactor
        self._spiders: list[str] | None = None
        self._waiting: list[defer.Deferred[list[str]]] = []
        self._running = False

    def get(self) -> defer.Deferred[list[str]]:
        if self._spiders is not None:
            return defer.succeed(list(self._spiders))
        d: defer.Deferred[list[str]] = defer.Deferred()
        self._waiting.append(d)
        if not self._running:
            self._running = True
            self._run()
        return d

    def _run(self) -> None:
        kwargs = {"reactor": self.reactor} if self.reactor is not None else {}
        d = utils.getProcessOutputAndValue(sys.executable, ["-m", "scrapy", "list"], env=self.env,
                                           path=str(self.project_dir), **kwargs)
        d.addBoth(self._done)

    def _done(self, result: Any) -> None:
        self._running = False
        waiting, self._waiting = self._waiting, []
        if isinstance(result, tuple) and result[2] == 0:
            self._spiders = [line.strip() for line in result[0].decode().splitlines() if line.strip()]
            logger.info("spiders of the project: %s", ", ".join(self._spiders))
            for d in waiting:
                d.callback(list(self._spiders))
            return
        detail = result[1].decode(errors="replace")[-500:] if isinstance(result, tuple) else str(result)
        failure = SpiderListError(f"scrapy list failed: {detail.strip()}")
        for d in waiting:
            d.errback(failure)
