"""The master floor's Lua scripts (staging, landing, finishing, requeueing a retired worker's tasks), one ``.lua``
file each. The snippets they share with the frontier (``pending.lua``) live in ``frontier/lua``."""

from __future__ import annotations

from pathlib import Path

LUA = Path(__file__).parent
