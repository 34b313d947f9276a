"""The master floor's Lua scripts (staging, landing, finishing, reseeding a retired worker's tasks), one ``.lua`` file
each. The snippet they share with the frontier (``pending.lua``) lives in ``messaging/lua``; the steps of a retired
job's requeue that touch its queues and leases live in ``frontier/lua`` (``frontier.client``)."""

from __future__ import annotations

from pathlib import Path

LUA = Path(__file__).parent
