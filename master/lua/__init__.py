"""The master floor's Lua scripts (staging, landing, finishing, reseeding a retired worker's tasks), one ``.lua`` file
each. The snippets they share with the frontier (``pending.lua``) live in ``frontier/lua``, and so do the steps of a
retired job's requeue that touch its queues and leases (``frontier.client``)."""

from __future__ import annotations

from pathlib import Path

LUA = Path(__file__).parent
