-- Step 1 of a dispatch batch (master/staging.py), in the slot of seeds: check the leader's epoch (fencing), take
-- the picked tasks out of seeds and record them, with their seeds score and destination, under the batch id in
-- the epoch's staging hash.
-- KEYS: seeds, epoch, staging hash, staging epochs. ARGV: epoch, batch, (task, job, domain)*.
-- Reply: the indexes of the picks that were still in seeds.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return redis.error_reply('FENCED stale dispatcher epoch') end
local staged, taken = {}, {}
for i = 3, #ARGV, 3 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score then
    redis.call('ZREM', KEYS[1], ARGV[i])
    staged[#staged + 1] = {ARGV[i], score, ARGV[i + 1], ARGV[i + 2]}
    taken[#taken + 1] = (i - 3) / 3
  end
end
if #staged > 0 then
  redis.call('HSET', KEYS[3], ARGV[2], cjson.encode(staged))
  redis.call('SADD', KEYS[4], ARGV[1])
end
return taken
