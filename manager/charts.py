"""The Stats page's history: one sample of the fleet per minute in Redis (``history:stats``), kept a day.

Every manager tries to sample each minute (a timer); the first to claim the minute (``SET NX``) writes it, so any
number of managers write one sample. The page loads the samples first, then adds its live points: its charts show
the last hour (and more) from the moment it opens, and survive a manager's restart.
"""

from __future__ import annotations

import json
from typing import Any

from manager import fleet
from messaging import keys

KEEP_SECONDS = 24 * 3600
SHOWN_SECONDS = 2 * 3600  # what the page loads: the last two hours


def sample(redis: Any, window_minutes: int, heartbeat_ttl: float) -> bool:
    """Write this minute's sample unless another manager did; True when this call wrote it."""
    data = fleet.stats(redis, window_minutes)
    minute = int(data["time"] // 60 * 60)
    if not redis.set(keys.stats_history_claim(minute), "1", nx=True, ex=180):
        return False
    alive = sum(1 for w in data["workers"]
                if w["last_heartbeat"] is not None and data["time"] - w["last_heartbeat"] <= heartbeat_ttl)
    point = {"time": minute, "pages_per_minute": data["pages_per_minute"], "seeds": data["seeds"],
             "queued": data["queued"], "leased": data["leased"], "workers": alive}
    pipe = redis.pipeline(transaction=False)
    pipe.zadd(keys.STATS_HISTORY, {json.dumps(point, sort_keys=True): minute})
    pipe.zremrangebyscore(keys.STATS_HISTORY, "-inf", f"({minute - KEEP_SECONDS}")
    pipe.execute()
    return True


def history(redis: Any, now: float, seconds: float = SHOWN_SECONDS) -> list[dict[str, Any]]:
    """The samples of the last ``seconds``, oldest first."""
    return [json.loads(raw) for raw in redis.zrangebyscore(keys.STATS_HISTORY, now - seconds, "+inf")]
