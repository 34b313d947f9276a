"""The scripts of the frontier's queue/lease protocol (``frontier/lua``), declared once for the client's modules.

Every key of a call shares one hash tag — the domain (queues, leases, throttles, block, robots.txt, pending counts)
or the job (its ready index) — so each script runs on one node of a Redis Cluster unchanged. The Redis clock comes
from a preamble (``messaging/lua/now_*.lua``): ``now`` is ARGV[1] when a caller passes a time, else ``TIME``.
"""

from __future__ import annotations

from frontier.lua import LUA, PACE_LUA, PENDING_LUA
from messaging.clock import NOW_MICROSECONDS_LUA, NOW_SECONDS_LUA
from messaging.scripts import lua_script

# a job's queues and leases (hash tag: the domain)
TAKE = lua_script(LUA / "take.lua", NOW_MICROSECONDS_LUA, PACE_LUA)  # pop and lease at a paced slot
RESERVE = lua_script(LUA / "reserve.lua", NOW_MICROSECONDS_LUA, PACE_LUA)  # a hit without a lease
ACK = lua_script(LUA / "ack.lua")
COMPLETE = lua_script(LUA / "complete.lua", PENDING_LUA)  # acks and the crawls' pending counts, atomically
RENEW = lua_script(LUA / "renew.lua", NOW_MICROSECONDS_LUA)
REQUEUE = lua_script(LUA / "requeue.lua", NOW_MICROSECONDS_LUA)  # expired leases back into their queue
REQUEUE_ORPHANS = lua_script(LUA / "requeue_orphans.lua")  # leases nobody holds, after an outage
DROP = lua_script(LUA / "drop.lua")  # a blacklisted domain's queue
RETIRED_COLLECT = lua_script(LUA / "retired_collect.lua")  # a retired job's queue and leases into its outbox
RETIRED_RELEASE = lua_script(LUA / "retired_release.lua", PENDING_LUA)  # ...and out of the pending counts, once
PARK = lua_script(LUA / "park.lua", PENDING_LUA)  # leases of paused crawls handed back (their hits withdrawn)
PARK_QUEUED = lua_script(LUA / "park_queued.lua", PENDING_LUA, LUA / "crawl_of.lua")  # a queue's tasks of them
UNPARK = lua_script(LUA / "unpark.lua", PENDING_LUA, LUA / "crawl_of.lua")  # a resumed crawl's, back in the queue

# a job's ready index (hash tag: the job)
READY_WALK = lua_script(LUA / "ready_walk.lua", NOW_MICROSECONDS_LUA)
READY_ADD = lua_script(LUA / "ready_add.lua", NOW_MICROSECONDS_LUA)
READY_DUE = lua_script(LUA / "ready_due.lua", NOW_MICROSECONDS_LUA)  # due domains and all: waiting for pace?

# the domain's block and robots.txt (hash tag: the domain)
BLOCK = lua_script(LUA / "block.lua", NOW_MICROSECONDS_LUA)
ROBOTS_CLAIM = lua_script(LUA / "robots_claim.lua", NOW_SECONDS_LUA)
ROBOTS_STORE = lua_script(LUA / "robots_store.lua")
ROBOTS_DOWN = lua_script(LUA / "robots_down.lua", NOW_SECONDS_LUA)
ROBOTS_RENEW = lua_script(LUA / "robots_renew.lua")
