-- Complete leased tasks of one domain: acknowledge each lease and take the task out of its crawl's pending count
-- of the domain, in one atomic step (docs/architecture.md, "complete"). A crash can therefore never leave a task
-- acknowledged but still counted as pending, which would keep its crawl from ever finishing. A lease that is no
-- longer held (expired and requeued, purged by a stop, or moved back to seeds because the job was retired) is
-- refused and changes nothing: whoever holds the task now completes it.
--
-- KEYS[1] <job>:{d}:inflight   KEYS[2] <job>:{d}:leasescores   KEYS[3] pending:{d}
-- ARGV: (task, crawlid)* pairs
-- Reply: the tasks whose lease was acknowledged now. Which leases are held is read in one ZMSCORE; they go in one
-- ZREM, their lease scores in one HDEL, and each crawl's count goes down once by its number of tasks.
if #ARGV == 0 then return {} end
local members = {}
for i = 1, #ARGV, 2 do members[#members + 1] = ARGV[i] end
local held = redis.call('ZMSCORE', KEYS[1], unpack(members))
local done, seen, per_crawl, crawls = {}, {}, {}, {}
for j = 1, #members do
  local task = members[j]
  if held[j] and not seen[task] then
    seen[task] = true
    done[#done + 1] = task
    local crawl = ARGV[2 * j]
    if not per_crawl[crawl] then
      per_crawl[crawl] = 0
      crawls[#crawls + 1] = crawl
    end
    per_crawl[crawl] = per_crawl[crawl] + 1
  end
end
if #done == 0 then return done end
redis.call('ZREM', KEYS[1], unpack(done))
redis.call('HDEL', KEYS[2], unpack(done))
for _, crawl in ipairs(crawls) do pending_sub(KEYS[3], crawl, per_crawl[crawl]) end
return done
