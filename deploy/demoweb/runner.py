"""Start, stop and inspect the demo web of a local run (``crawlfleet demoweb up|down|status``).

The server runs as its own process (``python -m deploy.demoweb``, log in ``<run_dir>/logs/demoweb.log``) and
is recorded in the run's state file::

    "demoweb": {"pid": …, "port": …, "sites": {"news.fleet.test": "127.0.0.11", …}, "pages": …, "static": …},
    "hosts_file": "<run_dir>/hosts"

``hosts_file`` is the state-file default of ``CRAWLFLEET_HOSTS_FILE``, so every crawlfleet process of the run
(the Scrapy resolver, proxies, validators) resolves the demo names without further configuration.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
from pathlib import Path
from typing import Any

from deploy.demoweb.router import MANIFEST_PATH
from deploy.demoweb.sites import DEFAULT_PAGES, DEFAULT_SEED, DEFAULT_SLOW_SECONDS, base_url, build_sites
from deploy.procs import free_port, pid_alive, port_free, spawn, stop_pid, wait_for
from deploy.state import update_state
from messaging.settings import load, read_state

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 15.0
# Static mode renders every page before it listens: about 0.25 ms a page on one core, so allow generously.
STATIC_SECONDS_PER_PAGE = 0.002


class DemoWebError(RuntimeError):
    """The demo web could not be started (already running, or it did not come up)."""


def site_url(name: str, status: dict[str, Any]) -> str:
    """The base URL of a site of a running demo web, e.g. ``http://news.fleet.test:8123/``."""
    if name not in status.get("sites", {}):
        raise KeyError(f"no demo site {name!r}; sites: {', '.join(status.get('sites', {}))}")
    return base_url(name, status["port"])


def fetch(
    ip: str, port: int, host: str, path: str, timeout: float = 5.0
) -> tuple[int, dict[str, str], bytes]:
    """GET ``path`` from a demo site without any name resolution; redirects are not followed."""
    conn = http.client.HTTPConnection(ip, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{port}"})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def start_demoweb(
    run_dir: str | os.PathLike[str],
    pages: int = DEFAULT_PAGES,
    static: bool = False,
    port: int | None = None,
    timeout: float | None = None,
    slow_seconds: float = DEFAULT_SLOW_SECONDS,
    seed: str = DEFAULT_SEED,
    first_ip: str | None = None,
) -> dict[str, Any]:
    """Start the demo web in the background, wait (bounded) until it answers, record it; returns its status.

    ``timeout`` defaults to 15 s, plus the time static mode needs to pre-render its pages. ``first_ip``: the first
    of the demo web's addresses (default: CRAWLFLEET_DEMOWEB_ADDRESSES).
    """
    run_dir = Path(run_dir)
    current = demoweb_status(run_dir)
    if current["running"]:
        raise DemoWebError(f"the demo web already runs (pid {current['pid']}, port {current['port']}); "
                           "stop it first")
    first_ip = first_ip or load().demoweb_addresses
    try:
        sites = build_sites(pages, seed, first_ip)
    except ValueError as exc:
        raise DemoWebError(str(exc)) from exc
    port = port or common_free_port([site.ip for site in sites])
    hosts_file = run_dir / "hosts"
    hosts_file.unlink(missing_ok=True)  # the server writes it once it listens: its presence means "ready"
    log_path = run_dir / "logs" / "demoweb.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "deploy.demoweb", "--run-dir", str(run_dir), "--pages", str(pages),
            "--port", str(port), "--slow-seconds", str(slow_seconds), "--seed", seed, "--first-ip", first_ip]
    if static:
        argv.append("--static")
    if timeout is None:
        timeout = STARTUP_TIMEOUT + (STATIC_SECONDS_PER_PAGE * pages * len(sites) if static else 0.0)

    # ``-m`` from the project root imports this checkout's packages, wherever the caller runs.
    proc = spawn(argv, log_path=log_path, cwd=PROJECT_ROOT)

    def exited() -> str | None:
        code = proc.poll()
        return f"it exited with code {code}; see {log_path}" if code is not None else None

    def answers() -> bool:
        status, _, body = fetch(sites[0].ip, port, sites[0].name, MANIFEST_PATH, timeout=1.0)
        return status == 200 and json.loads(body)["port"] == port and hosts_file.exists()

    try:
        wait_for(answers, timeout, f"the demo web on port {port}", interval=0.1, alive=exited)
    except BaseException:
        stop_pid(proc.pid)
        raise
    update_state(
        run_dir,
        demoweb={"pid": proc.pid, "port": port, "sites": {site.name: site.ip for site in sites},
                 "pages": pages, "static": static, "seed": seed, "slow_seconds": slow_seconds,
                 "log": str(log_path)},
        hosts_file=str(hosts_file),
    )
    return demoweb_status(run_dir)


def common_free_port(addresses: list[str], tries: int = 20) -> int:
    """A port free on every one of ``addresses`` (the demo web listens on all of them with one port)."""
    for _ in range(tries):
        port = free_port(addresses[0])
        if all(port_free(port, ip) for ip in addresses[1:]):
            return port
    raise DemoWebError(f"no port free on every address {addresses[0]} .. {addresses[-1]}")


def stop_demoweb(run_dir: str | os.PathLike[str], timeout: float = 10.0) -> bool:
    """Stop the run's demo web by its PID and forget it; returns True when it was running."""
    record = read_state(run_dir).get("demoweb")
    if not record:
        return False
    was_running = stop_pid(record["pid"], timeout=timeout)
    first_ip = next(iter(record["sites"].values()))
    wait_for(lambda: port_free(record["port"], first_ip), timeout, f"port {record['port']} to be free")
    update_state(run_dir, demoweb=None, hosts_file=None)
    return was_running


def demoweb_status(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"running": bool, "pid", "port", "sites": {name: ip}, "urls": {name: url}, "hosts_file", …}``.

    A recorded server whose process is gone shows as not running (with its last record).
    """
    state = read_state(run_dir)
    record = state.get("demoweb")
    if not record:
        return {"running": False}
    status = dict(record)
    status["running"] = pid_alive(record["pid"])
    status["hosts_file"] = state.get("hosts_file")
    status["urls"] = {name: base_url(name, record["port"]) for name in record["sites"]}
    return status
