-- The Redis-clock minute of `now` (frontier/registry.py: per-minute completions and busy flags). Prepended after
-- messaging/lua/now_seconds.lua.
local minute = math.floor(now / 60)
