"""The frontier floor's Lua scripts, one ``.lua`` file each, and the snippets several of them share."""

from __future__ import annotations

from pathlib import Path

from messaging.scripts import LUA as MESSAGING_LUA

LUA = Path(__file__).parent
PENDING_LUA = MESSAGING_LUA / "pending.lua"  # pending_sub(): a crawl's pending count of one hash slot (also seeds')
PACE_LUA = LUA / "pace.lua"  # paced hits: token buckets and widened sliding windows (take, reserve)
