"""Client factories: every component connects to Redis, Kafka, ZooKeeper and MongoDB through these.

Each takes the resolved :class:`~messaging.settings.Settings` (default: :func:`messaging.settings.load`), so that a
connection string, credentials or TLS option is configured once for the whole host.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeAlias

from kafka.serializer import Serializer

from messaging.settings import Settings, load

if TYPE_CHECKING:
    from redis import Redis
    from redis.cluster import RedisCluster

RedisClient: TypeAlias = "Redis | RedisCluster"
"""What :func:`redis_client` returns and what every component that talks to Redis takes (``redis.Redis``, or
``redis.cluster.RedisCluster`` when CRAWLFLEET_REDIS_CLUSTER is on)."""


def as_text(value: Any) -> str:
    """A Redis reply (or ZooKeeper data) as ``str``: bytes decoded as UTF-8, anything else through ``str``. The one
    place that does it: the clients return bytes (``decode_responses`` is off, Lua scripts and the raw BITFIELD
    reader want bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _settings(settings: Settings | None) -> Settings:
    return settings if settings is not None else load()


# --- redis -------------------------------------------------------------------------------------------------------
def redis_client(settings: Settings | None = None, **kwargs: Any) -> RedisClient:
    """A Redis client from CRAWLFLEET_REDIS_URL: ``redis.Redis``, or ``redis.cluster.RedisCluster`` in cluster mode.

    ``rediss://`` URLs use TLS; ``user:password@`` authenticates. Replies are bytes (decode where needed).

    **A failed call is never sent again by the client** (plain Redis): a call whose connection broke after Redis ran
    it (Redis killed while it answered, the call already in its AOF; a reply slower than ``socket_timeout``) would
    run twice, the caller seeing only the second answer — a second ``ZADD NX`` says "there already", a second Bloom
    check-and-add "seen" for what the first one marked, a second take leases another task. So the error reaches the
    caller, whose own retry knows what is safe to repeat (the worker's commit: ``spiders.worker.commit``; every loop
    retries through ``messaging.outage.OutageLog``). ``Redis.from_url`` connections retry nothing, but
    ``redis.Redis()``'s default re-sends a call up to ten times (the script of ``tests/e2e/
    test_redis_client.py`` then ran nine times): the policy is written here, not left to a library default. A
    connection that failed is dropped (redis-py disconnects it); an idle pooled one whose server closed it (Redis
    restarted) is replaced by the pool before anything is written to it (``get_connection`` sees the closed
    socket), and one idle for ``health_check_interval`` seconds is PINGed first. A Redis Cluster keeps redis-py's
    retries: they are also how it follows a failover to the promoted replica.
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.cluster import RedisCluster
    from redis.retry import Retry

    settings = _settings(settings)
    options: dict[str, Any] = {"socket_timeout": 30, "socket_connect_timeout": 10, "health_check_interval": 30}
    options.update(kwargs)
    if settings.redis_cluster:
        options.pop("health_check_interval", None)
        return RedisCluster.from_url(settings.redis_url, **options)
    options.setdefault("retry", Retry(NoBackoff(), 0))
    return redis.Redis.from_url(settings.redis_url, **options)


# --- kafka -------------------------------------------------------------------------------------------------------
def kafka_security(settings: Settings) -> dict[str, Any]:
    """kafka-python security options (SSL / SASL) from the settings; empty for PLAINTEXT."""
    protocol = settings.kafka_security_protocol.upper()
    options: dict[str, Any] = {"security_protocol": protocol}
    if "SASL" in protocol:
        options.update(
            sasl_mechanism=settings.kafka_sasl_mechanism or "PLAIN",
            sasl_plain_username=settings.kafka_sasl_username or None,
            sasl_plain_password=settings.kafka_sasl_password or None,
        )
    if "SSL" in protocol:
        options.update(
            ssl_cafile=settings.kafka_ssl_cafile or None,
            ssl_certfile=settings.kafka_ssl_certfile or None,
            ssl_keyfile=settings.kafka_ssl_keyfile or None,
        )
    return options


class JsonValues(Serializer):
    """Record values as UTF-8 JSON (non-ASCII kept as is: Chinese text is a third of the size)."""

    def serialize(self, topic: str, headers: Any, data: Any) -> bytes | None:
        return None if data is None else json.dumps(data, ensure_ascii=False).encode("utf-8")


class Utf8Keys(Serializer):
    def serialize(self, topic: str, headers: Any, data: Any) -> bytes | None:
        return data.encode("utf-8") if isinstance(data, str) else data


def _bootstrap(settings: Settings) -> list[str]:
    return [server.strip() for server in settings.kafka_bootstrap.split(",") if server.strip()]


def kafka_producer(settings: Settings | None = None, **kwargs: Any) -> Any:
    """A JSON producer: values are dicts, in order per partition, retried for CRAWLFLEET_KAFKA_DELIVERY_TIMEOUT.

    Idempotent (CRAWLFLEET_KAFKA_IDEMPOTENCE, with acks=all as it requires): a request that timed out while the broker
    was paused, and that the broker had kept, is dropped by the broker when the producer retries it (a Kafka pause
    once put ``crawl_finished`` on the topic twice that way). kafka-python leaves idempotence off, with a warning, for
    a broker older than 0.11; a caller that asks for weaker ``acks`` gets a producer without it."""
    from kafka import KafkaProducer

    settings = _settings(settings)
    options: dict[str, Any] = {
        "bootstrap_servers": _bootstrap(settings),
        "value_serializer": JsonValues(),
        "key_serializer": Utf8Keys(),
        "linger_ms": 5,
        "max_in_flight_requests_per_connection": 1,
        "request_timeout_ms": 15000,
        "delivery_timeout_ms": int(settings.kafka_delivery_timeout * 1000),
    }
    weaker = kwargs.get("acks", "all") not in ("all", -1)
    if settings.kafka_idempotence and not weaker:
        options["acks"] = "all"  # kafka-python's default enable_idempotence (True) then holds
    else:
        options.update(acks=1, enable_idempotence=False, retries=5)
    options.update(kafka_security(settings))
    options.update(kwargs)
    return KafkaProducer(**options)


def is_idempotent(producer: Any) -> bool:
    """Whether kafka-python made ``producer`` idempotent (the broker supports it and nothing asked otherwise)."""
    return bool(getattr(producer, "config", {}).get("enable_idempotence"))


def discard_producer(producer: Any) -> None:
    """Close a producer *without* delivering what it still buffers: after a send that failed or timed out, the
    record may still sit in the producer and reach Kafka when it returns, besides the retry that the caller makes
    (a ``crawl_finished`` event was once delivered twice that way). Never blocks."""
    sender = getattr(producer, "_sender", None)
    if sender is not None:
        sender.force_close()  # kafka-python: abort the buffered batches instead of sending them
    try:
        producer.close(timeout=0)
    except Exception:  # closing a producer that cannot flush: nothing left to do with it
        pass


def kafka_consumer(settings: Settings | None = None, *topics: str, **kwargs: Any) -> Any:
    """A consumer with manual commits (commit after the work is durable) and the configured group timeouts."""
    from kafka import KafkaConsumer

    settings = _settings(settings)
    options: dict[str, Any] = {
        "bootstrap_servers": _bootstrap(settings),
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": settings.kafka_session_timeout_ms,
        "heartbeat_interval_ms": settings.kafka_heartbeat_ms,
        "max_poll_records": 500,
        "request_timeout_ms": max(30000, settings.kafka_session_timeout_ms + 5000),
    }
    options.update(kafka_security(settings))
    options.update(kwargs)
    return KafkaConsumer(*topics, **options)


def kafka_admin(settings: Settings | None = None, **kwargs: Any) -> Any:
    from kafka.admin import KafkaAdminClient

    settings = _settings(settings)
    options: dict[str, Any] = {"bootstrap_servers": _bootstrap(settings), "request_timeout_ms": 15000}
    options.update(kafka_security(settings))
    options.update(kwargs)
    return KafkaAdminClient(**options)


def ensure_topics(settings: Settings | None = None, partitions: dict[str, int] | None = None) -> None:
    """Create the given topics (name -> partitions) when missing; existing topics are left as they are."""
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    settings = _settings(settings)
    wanted = partitions or {}
    admin = kafka_admin(settings)
    try:
        existing = set(admin.list_topics())
        missing = [NewTopic(name, count, 1) for name, count in wanted.items() if name not in existing]
        if missing:
            try:
                admin.create_topics(missing)
            except TopicAlreadyExistsError:
                pass  # another process created it meanwhile
    finally:
        admin.close()


# --- zookeeper ---------------------------------------------------------------------------------------------------
def zk_client(settings: Settings | None = None, start: bool = True, **kwargs: Any) -> Any:
    """A started kazoo client with the configured (short) session timeout; the connection string may hold a chroot."""
    from kazoo.client import KazooClient

    settings = _settings(settings)
    # reconnect attempts back off only up to CRAWLFLEET_ZK_RECONNECT_MAX_DELAY, never kazoo's hour, forever
    reconnect = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_jitter": 0.4,
                 "max_delay": settings.zk_reconnect_max_delay}
    options: dict[str, Any] = {"hosts": settings.zk_hosts, "timeout": settings.zk_timeout,
                               "connection_retry": reconnect}
    options.update(kwargs)
    client = KazooClient(**options)
    if start:
        client.start(timeout=max(10.0, settings.zk_timeout * 2))
    return client


# --- mongodb -----------------------------------------------------------------------------------------------------
def mongo_client(settings: Settings | None = None, **kwargs: Any) -> Any:
    """A pymongo client from CRAWLFLEET_MONGO_URI (credentials and TLS as URI options)."""
    from pymongo import MongoClient

    settings = _settings(settings)
    options: dict[str, Any] = {"serverSelectionTimeoutMS": 10000}
    options.update(kwargs)
    return MongoClient(settings.mongo_uri, **options)

