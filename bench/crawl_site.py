"""The static site of ``bench.crawl``: the demo web's pages written to files once, served by Debian's nginx.

The crawl benchmark must measure the crawlers, not the site: a Python server (the demo web) would be the bottleneck
long before Scrapy is. So the demo web's ``news`` (UTF-8, blog-style URLs), ``china`` (GBK, CMS-style URLs) and
``blog`` sites, ``articles`` articles each, are rendered by the demo web's own :class:`deploy.demoweb.router.Router`
into a cache directory under the run directory (rendered again only when the size, seed or port changes: the pages'
canonical links carry the port), and nginx serves them: one ``server`` block per site name, each site on its own
``127.0.0.x`` as in the demo web, all on one port, with a generated ``nginx.conf`` under the run directory and the
run's hosts file (``CRAWLFLEET_HOSTS_FILE``) written exactly as the demo web writes it.

The blog's ``Crawl-delay: 2`` is left out (``crawl_delay=None``): robots.txt is otherwise served as the demo web
serves it (only ``/private/``, ``/_demoweb/`` and ``/ads/`` disallowed, none of which the crawl's rule follows), and
every side of the benchmark obeys it.

nginx writes one access-log line per request (``$msec $host $request_uri $status``, unbuffered, so that a side's
lines are all there when it ends); :func:`read_access_log` reads a side's slice of it by byte offset, and
:func:`check_fetches` says whether a side fetched every page of the site exactly once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from deploy.demoweb.router import Router, StreamReply
from deploy.demoweb.sites import DEFAULT_SEED, Site, build_sites, hosts_file_text
from deploy.procs import free_port, pid_alive, port_free, port_open, spawn, stop_pid, wait_for

NGINX = "/usr/sbin/nginx"
SITE_NAMES = ("news.fleet.test", "china.fleet.test", "blog.fleet.test")
ROBOTS = "/robots.txt"
# nginx's own MIME map would do, but a self-contained configuration does not depend on /etc/nginx.
MIME_TYPES = {"text/html": "html htm shtml", "text/plain": "txt", "text/css": "css", "image/gif": "gif",
              "application/xml": "xml", "application/json": "json"}


def bench_sites(articles: int, seed: str = DEFAULT_SEED) -> tuple[Site, ...]:
    """The three content sites of the benchmark, ``articles`` articles each, without the blog's crawl delay."""
    sites = [site for site in build_sites(articles, seed) if isinstance(site, Site) and site.name in SITE_NAMES]
    return tuple(dataclasses.replace(site, crawl_delay=None) for site in sites)


def crawled_paths(site: Site) -> list[str]:
    """What a complete crawl with ``DEMO_UNIVERSAL_RULE`` fetches of a site (robots.txt aside): the home page, every
    list page (sections and their pagination) and every article."""
    return ["/", *site.list_paths(), *(site.article_path(article_id) for article_id in range(site.articles))]


def write_hosts_file(path: Path, text: str) -> None:
    """Replace the hosts file atomically (as the demo web does): a resolver re-reading it never sees half of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def file_for(root: Path, path: str) -> Path:
    """Where nginx finds the page of ``path``: a path ending in ``/`` is a directory with an ``index.html``."""
    relative = path.lstrip("/")
    if not relative or relative.endswith("/"):
        relative += "index.html"
    return root / relative


@dataclass(frozen=True)
class SiteCache:
    """Rendered pages of the benchmark's sites for one (articles, seed, port)."""

    root: Path
    articles: int
    seed: str
    port: int

    @property
    def stamp(self) -> Path:
        return self.root / "rendered.json"

    def key(self) -> dict[str, object]:
        return {"articles": self.articles, "seed": self.seed, "port": self.port}

    def rendered_pages(self) -> int | None:
        """Pages on disk when the cache holds this key's rendering, else None."""
        try:
            stamp = json.loads(self.stamp.read_text())
        except (OSError, ValueError):
            return None
        return stamp.get("pages") if {k: stamp.get(k) for k in self.key()} == self.key() else None

    def site_root(self, name: str) -> Path:
        return self.root / name


def render_site_cache(cache: SiteCache, sites: tuple[Site, ...]) -> int:
    """Write every finite page of the sites (the demo web's static-mode set) as files; returns the page count."""
    rendered = cache.rendered_pages()
    if rendered is not None:
        return rendered
    shutil.rmtree(cache.root, ignore_errors=True)
    router = Router(sites, port=cache.port, pages=cache.articles, seed=cache.seed, static=False)
    written = 0
    for site in sites:
        root = cache.site_root(site.name)
        for path in router.finite_paths(site):
            reply = router.route(site, path, {})
            if isinstance(reply, StreamReply) or reply.status != 200:
                continue
            target = file_for(root, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(reply.body)
            written += 1
    cache.stamp.write_text(json.dumps({**cache.key(), "pages": written}))
    return written


def nginx_conf(sites: Iterable[Site], port: int, cache_root: Path, run_dir: Path, as_root: bool) -> str:
    """The whole nginx.conf: one worker, foreground (stopped by PID), one server block per site and address."""
    types = "".join(f"        {mime} {extensions};\n" for mime, extensions in MIME_TYPES.items())
    servers = "".join(
        f"    server {{\n"
        f"        listen {site.ip}:{port};\n"
        f"        server_name {site.name};\n"
        f"        root {cache_root / site.name};\n"
        f"        index index.html;\n"
        f"        charset {site.encoding};\n"
        f"    }}\n"
        for site in sites
    )
    temp = run_dir / "nginx-temp"
    user = "user root root;\n" if as_root else ""  # as root nginx would run its worker as nobody
    return (
        f"# generated by bench.crawl_site: the crawl benchmark's static site\n"
        f"{user}worker_processes 1;\n"
        f"daemon off;\n"
        f"pid {run_dir / 'nginx.pid'};\n"
        f"error_log {run_dir / 'nginx-error.log'} warn;\n"
        f"events {{\n    worker_connections 4096;\n}}\n"
        f"http {{\n"
        f"    types {{\n{types}    }}\n"
        f"    default_type application/octet-stream;\n"
        f"    log_format bench '$msec $host $request_uri $status';\n"
        f"    access_log {run_dir / 'nginx-access.log'} bench;\n"
        f"    sendfile on;\n"
        f"    tcp_nopush on;\n"
        f"    tcp_nodelay on;\n"
        f"    keepalive_requests 1000000;\n"
        f"    keepalive_timeout 120s;\n"
        f"    server_tokens off;\n"
        f"    client_body_temp_path {temp / 'body'};\n"
        f"    proxy_temp_path {temp / 'proxy'};\n"
        f"    fastcgi_temp_path {temp / 'fastcgi'};\n"
        f"    uwsgi_temp_path {temp / 'uwsgi'};\n"
        f"    scgi_temp_path {temp / 'scgi'};\n"
        f"{servers}"
        f"}}\n"
    )


def require_nginx() -> None:
    if not os.access(NGINX, os.X_OK):
        raise SystemExit(f"{NGINX} is missing: run `make bench` (deploy/install-bench-deps.sh) or "
                         "`apt-get install -y nginx-light`")


class NginxServer:
    """Debian's nginx serving a generated site from ``run_dir``: launched, stopped by PID, its access log read."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.hosts_file = run_dir / "hosts"
        self.access_log = run_dir / "nginx-access.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def _launch(self, conf_text: str, temp_dirs: Iterable[str], ready: Callable[[], bool], timeout: float) -> None:
        """Write the config, start nginx and wait until ``ready`` (or say why nginx exited)."""
        for sub in temp_dirs:
            (self.run_dir / "nginx-temp" / sub).mkdir(parents=True, exist_ok=True)
        conf = self.run_dir / "nginx.conf"
        conf.write_text(conf_text)
        self.access_log.unlink(missing_ok=True)
        self.proc = spawn([NGINX, "-p", str(self.run_dir), "-c", str(conf)], self.run_dir / "nginx.log")
        proc = self.proc

        def exited() -> str | None:
            if proc.poll() is None:
                return None
            error_log = self.run_dir / "nginx-error.log"
            return f"nginx exited with {proc.returncode}: {error_log.read_text()[-800:] if error_log.exists() else ''}"

        wait_for(ready, timeout, f"nginx on port {self.port}", interval=0.05, alive=exited)

    def stop(self) -> None:
        if self.proc is not None and pid_alive(self.proc.pid):
            stop_pid(self.proc.pid)
        self.proc = None

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError("nginx is not running")
        return self.proc.pid

    def log_offset(self) -> int:
        return self.access_log.stat().st_size if self.access_log.exists() else 0


class StaticSite(NginxServer):
    """nginx serving the rendered sites: ``start()`` / ``stop()`` by PID; ``hosts_file`` maps the names."""

    def __init__(self, run_dir: Path, articles: int, seed: str = DEFAULT_SEED) -> None:
        super().__init__(run_dir)
        self.sites = bench_sites(articles, seed)
        self.articles = articles
        self.seed = seed

    def _port(self, cache_root: Path) -> int:
        """The cached pages' port when it is still free on every site address (their links carry it), else a new one."""
        try:
            cached = int(json.loads((cache_root / "rendered.json").read_text())["port"])
        except (OSError, ValueError, KeyError):
            cached = 0
        if cached and all(port_free(cached, site.ip) for site in self.sites):
            return cached
        return free_port(self.sites[0].ip)

    def start(self, timeout: float = 30.0) -> int:
        """Render (or reuse) the pages, start nginx, write the hosts file; returns the number of pages on disk."""
        require_nginx()
        cache_root = self.run_dir / "site-cache" / f"{self.articles}-{self.seed}"
        self.port = self._port(cache_root)
        cache = SiteCache(cache_root, self.articles, self.seed, self.port)
        pages = render_site_cache(cache, self.sites)
        self._launch(nginx_conf(self.sites, self.port, cache_root, self.run_dir, os.geteuid() == 0),
                     ("body", "proxy", "fastcgi", "uwsgi", "scgi"),
                     lambda: all(port_open(self.port, site.ip) for site in self.sites), timeout)
        write_hosts_file(self.hosts_file, hosts_file_text(self.sites, self.port))
        return pages

    def url(self, site: Site, path: str = "/") -> str:
        return f"http://{site.name}:{self.port}{path}"

    def expected(self) -> dict[str, list[str]]:
        return {site.name: crawled_paths(site) for site in self.sites}


@dataclass(frozen=True)
class Fetch:
    at: float  # epoch seconds ($msec)
    host: str
    path: str
    status: int


def parse_access_line(line: str) -> Fetch | None:
    """One ``$msec $host $request_uri $status`` line (``None`` for a torn or foreign line)."""
    parts = line.split(" ")
    if len(parts) != 4:
        return None
    try:
        return Fetch(float(parts[0]), parts[1], parts[2], int(parts[3]))
    except ValueError:
        return None


def read_access_log(path: Path, offset: int) -> list[Fetch]:
    """The requests logged from byte ``offset`` on."""
    with open(path, "rb") as log:
        log.seek(offset)
        text = log.read().decode("latin-1")
    return [fetch for fetch in map(parse_access_line, text.splitlines()) if fetch is not None]


@dataclass(frozen=True)
class FetchCheck:
    pages: int  # content pages fetched (robots.txt aside)
    robots: int  # robots.txt fetches (once per host per process or per cluster)
    problems: tuple[str, ...]  # empty: every page exactly once, nothing else, all 200

    @property
    def ok(self) -> bool:
        return not self.problems


def check_fetches(fetches: Iterable[Fetch], expected: dict[str, list[str]]) -> FetchCheck:
    """Whether every expected page (per host) was fetched exactly once with a 200, and nothing else but robots.txt."""
    counts: Counter[tuple[str, str]] = Counter()
    robots = 0
    problems: list[str] = []
    for fetch in fetches:
        if fetch.path == ROBOTS:
            robots += 1
            continue
        counts[fetch.host, fetch.path] += 1
        if fetch.status != 200:
            problems.append(f"{fetch.host}{fetch.path}: status {fetch.status}")
    wanted = {(host, path) for host, paths in expected.items() for path in paths}
    missing = sorted(wanted - set(counts))
    extra = sorted(set(counts) - wanted)
    twice = sorted(key for key, n in counts.items() if n > 1)
    for label, keys in (("never fetched", missing), ("not a page of the site", extra), ("fetched twice", twice)):
        if keys:
            sample = ", ".join(f"{host}{path}" for host, path in keys[:3])
            problems.append(f"{len(keys)} {label} (e.g. {sample})")
    return FetchCheck(sum(counts.values()), robots, tuple(problems[:10]))
