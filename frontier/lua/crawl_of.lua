-- of_crawl(member, needle): whether a task (canonical JSON, sorted keys) belongs to a crawl, given the needle
-- '"crawlid":' .. the crawl id as a JSON string (frontier/client/parking.py). Inside a string value a quote is
-- escaped, so only the task's own crawlid field can match; the next character ends the value.
local function of_crawl(member, needle)
  local at = 1
  while true do
    local first, last = string.find(member, needle, at, true)
    if not first then return false end
    local after = string.sub(member, last + 1, last + 1)
    if after == ',' or after == '}' then return true end
    at = last + 1
  end
end
