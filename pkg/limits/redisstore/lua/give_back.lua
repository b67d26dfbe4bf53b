-- give_back takes units back from a window's counter (window.go): a
-- refund's, or the cost of a refused hit that INCRBY counted. KEYS[1] = the
-- counter; ARGV[1] = the units; ARGV[2] = the count that the counter is read
-- as at most (2N where refused hits count, -1: none), which the units are
-- taken from. The counter never goes below zero, and a counter at zero is
-- deleted (an absent key counts zero). The TTL stays.
--
-- Returns the counter's value before, 0 for an absent key. A value that is
-- not an integer fails the script before any write.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local old = tonumber(v)
if not old or old ~= math.floor(old) then
  return redis.error_reply('envoy-rls: malformed state under key ' .. KEYS[1])
end
local cap = tonumber(ARGV[2])
local base = old
if cap >= 0 and base > cap then
  base = cap
end
local left = base - tonumber(ARGV[1])
if left > 0 then
  redis.call('SET', KEYS[1], string.format('%d', left), 'KEEPTTL')
else
  redis.call('DEL', KEYS[1])
end
return old
