-- A task left a domain slot (acknowledged or dropped): its crawl has one task less there (frontier.registry).
-- KEYS: pending:{d}. ARGV: (crawlid, n)*.
for i = 1, #ARGV, 2 do
  pending_sub(KEYS[1], ARGV[i], tonumber(ARGV[i + 1]))
end
return 1
