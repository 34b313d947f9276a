-- The children journal (spiders/worker/journal.py, step 2): before a commit marks its pages' children in the Bloom
-- filter, each page's *candidates* — its children the filter did not hold when it was asked, the only ones this page
-- can be the first to mark — are written under the page's entry, so that a commit cut off between the Bloom filter
-- and seeds is finished by whoever processes the page again (this process's retry, another worker after the lease
-- expired): it pushes exactly the entry's children. An entry is deleted by the call that pushes its children
-- (push_owed.lua, importance.lua), and expires after its keep time. Every key is in the slot of seeds.
--
-- KEYS: one entry per page with children (children:{seeds}:journal:<digest of the task>)
-- ARGV: keep (ms), then per page: n, (fingerprint, task)*n, its candidates
-- Reply per page: {} when it had no entry (this is its first commit; the candidates are written, if any), else
-- every (fingerprint, task) of its entry as a flat list, the earlier attempts' candidates with these merged in.
local keep = ARGV[1]
local at = 2
local out = {}
for i = 1, #KEYS do
  local n = tonumber(ARGV[at])
  local existed = redis.call('EXISTS', KEYS[i]) == 1
  for j = 0, n - 1 do
    redis.call('HSETNX', KEYS[i], ARGV[at + 1 + 2 * j], ARGV[at + 2 + 2 * j])
  end
  at = at + 1 + 2 * n
  if existed or n > 0 then redis.call('PEXPIRE', KEYS[i], keep) end
  out[i] = existed and redis.call('HGETALL', KEYS[i]) or {}
end
return out
