"""A site whose access log judges politeness, in a process of its own (``python -m bench.politeness_site``).

``paced_site(procs, run_dir, hosts, robots_status)`` starts it (stopped by PID with the test's other processes) and
returns a :class:`SiteProcess`: its URLs, its access log (``(time, host, path)`` of every request as it arrived, read
from the site's own file) and a hosts file naming its hosts. :meth:`SiteProcess.serve_fleet` adds those names to a
fleet's host map (CRAWLFLEET_HOSTS_FILE), before the fleet starts. Hosts may be given their own loopback address
(``name=127.37.0.n``): a partition by IP sees the addresses the workers resolve.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.politeness_site import read_log
from deploy.procs import wait_for
from tests.plugins.services import Processes

START_TIMEOUT = 30.0


@dataclass
class SiteProcess:
    port: int
    access_log: Path
    addresses: dict[str, str]  # host -> its loopback address
    run_dir: Path

    def url(self, host: str, path: str = "/p/0.html") -> str:
        return f"http://{host}:{self.port}{path}"

    def log(self) -> list[tuple[float, str, str]]:
        return read_log(self.access_log)

    def hits(self, host: str, robots: bool = True) -> list[float]:
        """Arrival times of the host's requests (its robots.txt too, unless ``robots`` is false), sorted."""
        return sorted(at for at, name, path in self.log() if name == host and (robots or path != "/robots.txt"))

    def serve_fleet(self, fleet: Any) -> None:
        """Name the site's hosts in the fleet's host map (a copy of it with these names added)."""
        current = fleet.env.get("CRAWLFLEET_HOSTS_FILE")
        text = Path(current).read_text() if current and Path(current).exists() else ""
        hosts = self.run_dir / "hosts"
        hosts.write_text(text + "".join(f"{address} {host}\n" for host, address in self.addresses.items()))
        fleet.env["CRAWLFLEET_HOSTS_FILE"] = str(hosts)


def paced_site(procs: Processes, run_dir: Path, hosts: dict[str, str], env: dict[str, str],
               robots_status: dict[str, int] | None = None) -> SiteProcess:
    """Start the site for ``hosts`` (name -> loopback address, "" for 127.0.0.1)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    ready, log = run_dir / "port", run_dir / "access.log"
    argv = ["-m", "bench.politeness_site", "--log", str(log), "--ready", str(ready)]
    argv += [arg for host, address in hosts.items() for arg in ("--host", f"{host}={address}" if address else host)]
    argv += [arg for host, status in (robots_status or {}).items() for arg in ("--robots-status", f"{host}={status}")]
    proc = procs.python(*argv, env=env, name="paced-site")
    wait_for(lambda: ready.exists() and ready.read_text().strip(), START_TIMEOUT, "the paced site to listen",
             alive=lambda: f"exited: {procs.log(proc)}" if proc.poll() is not None else None)
    return SiteProcess(int(ready.read_text()), log, {host: address or "127.0.0.1" for host, address in hosts.items()},
                       run_dir)
