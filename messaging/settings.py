"""One settings source for every crawlfleet component.

Every setting is an environment variable ``CRAWLFLEET_<NAME>``. Its value comes from, in order:

1. the process environment;
2. the local run's state file (``$CRAWLFLEET_RUN_DIR/state.json``, written by ``crawlfleet services up``), which
   supplies the connection settings of the services it started;
3. the built-in default below.

The Scrapy settings module, the CLI, the master, the monitors and the manager all read :func:`load`, so one
``export`` (or ``crawlfleet env``) configures a whole host. Every setting is declared here with its documentation:
``crawlfleet settings`` prints the table, and the README's configuration table is generated from it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PREFIX = "CRAWLFLEET_"


def parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {value!r}")


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    doc: str
    group: str
    parse: Callable[[str], Any] = str
    state_key: str | None = None  # the state-file field that supplies a default for a local run


SETTINGS: dict[str, Setting] = {}


def define(
    name: str,
    default: Any,
    doc: str,
    *,
    group: str,
    parse: Callable[[str], Any] = str,
    state_key: str | None = None,
) -> Setting:
    """Declare a setting; every ``CRAWLFLEET_*`` variable that any component reads must be declared."""
    if not name.startswith(PREFIX):
        raise ValueError(f"setting names start with {PREFIX}: {name}")
    if name in SETTINGS:
        raise ValueError(f"setting declared twice: {name}")
    setting = Setting(name, default, doc, group, parse, state_key)
    SETTINGS[name] = setting
    return setting


# --- local run ---------------------------------------------------------------------------------------------------
define("CRAWLFLEET_RUN_DIR", str(Path.home() / ".crawlfleet"),
       "Directory of the local run: state file, service data, logs.", group="local")
define("CRAWLFLEET_HOSTS_FILE", "",
       "Hosts file (``/etc/hosts`` format) mapping test host names such as ``*.fleet.test`` to loopback "
       "addresses; used by the Scrapy resolver, proxies and validators. Empty: system resolution only.",
       group="local", state_key="hosts_file")
define("CRAWLFLEET_NODE_NAME", "", "Name this host reports in API envelopes and registries (default: hostname).",
       group="local")
define("CRAWLFLEET_LOG_LEVEL", "INFO", "Log level of crawlfleet's long-running processes.", group="local")

# --- redis -------------------------------------------------------------------------------------------------------
define("CRAWLFLEET_REDIS_URL", "redis://127.0.0.1:6379/0",
       "Redis URL (``redis://`` or ``rediss://`` for TLS; user:password@ for ACL credentials). With "
       "CRAWLFLEET_REDIS_CLUSTER, any node of the cluster.", group="redis", state_key="redis_url")
define("CRAWLFLEET_REDIS_CLUSTER", False, "Talk to a Redis Cluster (redis-py RedisCluster) instead of one server.",
       group="redis", parse=parse_bool, state_key="redis_cluster")

# --- kafka -------------------------------------------------------------------------------------------------------
define("CRAWLFLEET_KAFKA_BOOTSTRAP", "127.0.0.1:9092", "Kafka bootstrap servers, comma-separated host:port.",
       group="kafka", state_key="kafka_bootstrap")
define("CRAWLFLEET_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT",
       "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.", group="kafka")
define("CRAWLFLEET_KAFKA_SASL_MECHANISM", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with a SASL protocol).",
       group="kafka")
define("CRAWLFLEET_KAFKA_SASL_USERNAME", "", "SASL user name.", group="kafka")
define("CRAWLFLEET_KAFKA_SASL_PASSWORD", "", "SASL password.", group="kafka")
define("CRAWLFLEET_KAFKA_SSL_CAFILE", "", "CA bundle for SSL/SASL_SSL.", group="kafka")
define("CRAWLFLEET_KAFKA_SSL_CERTFILE", "", "Client certificate for SSL.", group="kafka")
define("CRAWLFLEET_KAFKA_SSL_KEYFILE", "", "Client key for SSL.", group="kafka")
define("CRAWLFLEET_KAFKA_SESSION_TIMEOUT_MS", 10000, "Consumer-group session timeout.", group="kafka", parse=int)
define("CRAWLFLEET_KAFKA_HEARTBEAT_MS", 1000, "Consumer-group heartbeat interval.", group="kafka", parse=int)
define("CRAWLFLEET_TOPIC_INCOMING", "crawlfleet.incoming", "Topic of incoming requests.", group="kafka")
define("CRAWLFLEET_TOPIC_OUTBOUND", "crawlfleet.outbound", "Topic of answers and events.", group="kafka")
define("CRAWLFLEET_TOPIC_FAILED", "crawlfleet.failed", "Topic of rejected requests, with the reason.",
       group="kafka")

# --- zookeeper ---------------------------------------------------------------------------------------------------
define("CRAWLFLEET_ZK_HOSTS", "127.0.0.1:2181",
       "ZooKeeper connection string, host:port[,host:port][/chroot].", group="zookeeper", state_key="zk_hosts")
define("CRAWLFLEET_ZK_TIMEOUT", 5.0,
       "ZooKeeper session timeout in seconds (short: a lost master is replaced fast).", group="zookeeper",
       parse=float)
define("CRAWLFLEET_ZK_ROOT", "/crawlfleet", "Root znode of crawlfleet's tree.", group="zookeeper")

# --- mongodb -----------------------------------------------------------------------------------------------------
define("CRAWLFLEET_MONGO_URI", "mongodb://127.0.0.1:27017/",
       "MongoDB URI (credentials and TLS as URI options).", group="mongodb", state_key="mongo_uri")
define("CRAWLFLEET_MONGO_DB", "crawlfleet", "Database that holds the items (one collection per crawl).",
       group="mongodb")

# --- worker identity ---------------------------------------------------------------------------------------------
define("CRAWLFLEET_WORKER_IP", "",
       "Host IP identity: this host's address as crawled sites see it without a proxy (per-IP throttles). "
       "Default: the address of the interface that routes outwards.", group="worker")

# --- metrics -----------------------------------------------------------------------------------------------------
define("CRAWLFLEET_METRICS_PORT", 0,
       "Base port of the Prometheus /metrics endpoints; each process on a host takes the next free port from "
       "it. 0: an ephemeral port, registered in Redis.", group="metrics", parse=int)
define("CRAWLFLEET_METRICS_HOST", "127.0.0.1", "Address the /metrics endpoints listen on.", group="metrics")

# --- politeness --------------------------------------------------------------------------------------------------
define("CRAWLFLEET_LEASE_SECONDS", 600.0,
       "Lease of a popped task (seconds, Redis clock): at least download timeout x (retries + 1), or renewed while "
       "the task is processed; an expired lease returns the task to its domain queue.", group="politeness",
       parse=float)
define("CRAWLFLEET_ROBOTSTXT_OBEY", True,
       "Refuse URLs that the site's robots.txt disallows (as Scrapy's ROBOTSTXT_OBEY) and slow down to its "
       "Crawl-delay.", group="politeness", parse=parse_bool)
define("CRAWLFLEET_ROBOTSTXT_USER_AGENT", "crawlfleet",
       "User agent that robots.txt rules are matched for (as Scrapy's ROBOTSTXT_USER_AGENT); set it when "
       "User-Agent headers rotate.", group="politeness")
define("CRAWLFLEET_ROBOTS_TTL", 86400.0,
       "Seconds a fetched robots.txt stays in the cluster-wide cache (robots:{<domain>}).", group="politeness",
       parse=float)
define("CRAWLFLEET_ROBOTS_ERROR_TTL", 600.0,
       "Seconds an unreachable robots.txt (5xx, network error) is cached as allow-all before it is fetched again.",
       group="politeness", parse=float)


class Settings(Mapping[str, Any]):
    """Resolved settings: ``settings["CRAWLFLEET_REDIS_URL"]`` or ``settings.redis_url``."""

    def __init__(self, values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
        self._values = dict(values)
        self._sources = dict(sources)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, attr: str) -> Any:
        try:
            return self._values[PREFIX + attr.upper()]
        except KeyError:
            raise AttributeError(attr) from None

    def source(self, name: str) -> str:
        """Where a value came from: ``env``, ``state`` or ``default``."""
        return self._sources[name]

    def as_env(self) -> dict[str, str]:
        """The settings as environment variables, e.g. for a child process."""
        return {name: _format(value) for name, value in self._values.items()}


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def state_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / "state.json"


def read_state(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The local run's state file, or ``{}`` when there is none (no local run, or a production host)."""
    path = state_path(run_dir)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"unreadable state file {path}: {exc}") from exc


def load(env: Mapping[str, str] | None = None) -> Settings:
    """Resolve every declared setting from ``env`` (default: ``os.environ``), the state file and the defaults."""
    env = os.environ if env is None else env
    run_dir = env.get("CRAWLFLEET_RUN_DIR") or SETTINGS["CRAWLFLEET_RUN_DIR"].default
    state = read_state(run_dir)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, setting in SETTINGS.items():
        if name in env:
            try:
                values[name] = setting.parse(env[name])
            except ValueError as exc:
                raise ValueError(f"{name}={env[name]!r}: {exc}") from exc
            sources[name] = "env"
        elif setting.state_key and setting.state_key in state:
            values[name] = state[setting.state_key]
            sources[name] = "state"
        else:
            values[name] = setting.default
            sources[name] = "default"
    values["CRAWLFLEET_RUN_DIR"] = run_dir
    return Settings(values, sources)
