"""Script calls of many domains in one round trip per node, also on a Redis Cluster.

:func:`messaging.scripts.run_scripts` pipelines the calls on a plain Redis but runs them one by one on a cluster (each
call is routed by its keys), so a batch that touches many domains — a group take, a commit's completions, the
expiry check of leases — cost one round trip per domain there: with one or two tasks per domain, as in a broad
crawl, a round trip per task. :func:`run_by_node` sends one plain pipeline per node instead.
"""

from __future__ import annotations

from typing import Any

from messaging.scripts import is_cluster, run_scripts


def run_by_node(redis: Any, calls: list[tuple[Any, list[str], list[Any]]]) -> list[Any]:
    """:func:`messaging.scripts.run_scripts`, but on a Redis Cluster one plain pipeline per node (each call's keys
    share a slot) instead of a round trip per call. A call refused with MOVED or ASK (the slot is migrating) did not
    run there: it runs again through the cluster client, which follows the redirection. Other errors raise."""
    if not calls or not is_cluster(redis):
        return run_scripts(redis, calls)
    from redis.exceptions import ResponseError

    by_node: dict[str, list[int]] = {}
    nodes: dict[str, Any] = {}
    for n, (_, call_keys, _) in enumerate(calls):
        node = redis.get_node_from_key(call_keys[0])
        by_node.setdefault(node.name, []).append(n)
        nodes[node.name] = node
    replies: list[Any] = [None] * len(calls)
    for name, indexes in by_node.items():
        pipe = redis.get_redis_connection(nodes[name]).pipeline(transaction=False)
        for n in indexes:
            script, call_keys, args = calls[n]
            script(keys=call_keys, args=args, client=pipe)
        for n, reply in zip(indexes, pipe.execute(raise_on_error=False), strict=True):
            if isinstance(reply, ResponseError) and str(reply).startswith(("MOVED", "ASK")):
                script, call_keys, args = calls[n]
                reply = script(keys=call_keys, args=args, client=redis)
            elif isinstance(reply, Exception):
                raise reply
            replies[n] = reply
    return replies
