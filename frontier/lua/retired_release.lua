-- Requeue of a retired job, step 3 (master.requeue, through frontier.client): the tasks leave the domain's pending
-- counts, once (guarded by deleting the outbox). KEYS: outbox, pending:{d}. ARGV: (crawlid, n)*.
-- Reply: 1 released, 0 already released.
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
for i = 1, #ARGV, 2 do
  pending_sub(KEYS[2], ARGV[i], tonumber(ARGV[i + 1]))
end
return 1
