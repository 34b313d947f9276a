"""Run the demo web in the foreground: ``python -m deploy.demoweb [--run-dir D] [--pages N] [--static] …``.

It listens on every site's loopback address, on one port. With ``--run-dir`` it then writes ``D/hosts``,
the name map that the crawler's resolver reads (``CRAWLFLEET_HOSTS_FILE``); the file appears only once the
server listens, so its presence means "ready". ``crawlfleet demoweb up`` (:mod:`deploy.demoweb.runner`) runs
this in the background and records it in the run's state file. SIGTERM or SIGINT stops it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from deploy.demoweb import sites as demo_sites
from deploy.demoweb.resources import make_site
from deploy.demoweb.router import Router
from deploy.procs import free_port
from messaging.settings import load

log = logging.getLogger("deploy.demoweb")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m deploy.demoweb", description=__doc__.split("\n")[0])
    parser.add_argument("--run-dir", type=Path, help="write the hosts file here once listening")
    parser.add_argument("--pages", type=int, default=demo_sites.DEFAULT_PAGES, help="articles per site")
    parser.add_argument("--static", action="store_true", help="pre-render every page and serve from memory")
    parser.add_argument("--port", type=int, default=0, help="port on every site's address (default: free)")
    parser.add_argument("--slow-seconds", type=float, default=demo_sites.DEFAULT_SLOW_SECONDS,
                        help="delay of the slow page /live/")
    parser.add_argument("--seed", default=demo_sites.DEFAULT_SEED, help="seed of the generated content")
    parser.add_argument("--first-ip", default=None,
                        help="first of the sites' addresses (default: CRAWLFLEET_DEMOWEB_ADDRESSES)")
    return parser.parse_args(argv)


def write_hosts_file(path: Path, text: str) -> None:
    """Replace the file atomically: a resolver re-reading it never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s",
                        stream=sys.stdout)
    sites = demo_sites.build_sites(args.pages, args.seed, args.first_ip or load().demoweb_addresses)
    port = args.port or free_port(sites[0].ip)
    started = time.monotonic()
    router = Router(sites, port=port, pages=args.pages, seed=args.seed, static=args.static,
                    slow_seconds=args.slow_seconds)
    if args.static:
        log.info("pre-rendered %d pages in %.1f s", router.cached_pages, time.monotonic() - started)

    from twisted.logger import STDLibLogObserver, globalLogBeginner

    from messaging.reactor import running_reactor, serve_http

    globalLogBeginner.beginLoggingTo([STDLibLogObserver()], redirectStandardIO=False)

    reactor = running_reactor()  # installed on first use: kept out of the module's import
    factory = make_site(router, reactor)
    for site in sites:
        serve_http(factory, port, site.ip)
        log.info("%s on http://%s:%d/ (%s)", site.name, site.ip, port, f"{site.articles} articles")
    if args.run_dir:
        write_hosts_file(args.run_dir / "hosts", demo_sites.hosts_file_text(sites, port))
    mode = "static" if args.static else "dynamic"
    log.info("serving %d sites on port %d (%s mode)", len(sites), port, mode)
    reactor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
