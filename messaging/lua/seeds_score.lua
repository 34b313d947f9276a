-- A task's score in `seeds` (messaging/tasks.py): lower pops first, so higher priorities come first and, within a
-- priority, arrival order (first in, first out). Prepended, with MAX_PRIORITY and ARRIVAL_SPAN from messaging/tasks.py,
-- to every script that puts tasks into seeds (push_seeds.lua; master/lua/reseed.lua). Arrival numbers are taken
-- modulo ARRIVAL_SPAN (2^44) so that every score stays an exact integer in a double (255 * 2^44 < 2^53); the score is
-- formatted with %.0f because Lua's default number format keeps only 14 digits.
local function seeds_score(priority, arrival)
  return string.format('%.0f', (MAX_PRIORITY - tonumber(priority)) * ARRIVAL_SPAN + arrival % ARRIVAL_SPAN)
end
