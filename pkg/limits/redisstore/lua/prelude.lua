-- Shared head of every script (Go composes prelude, algorithms, run.lua). It
-- mirrors the helpers of pkg/limits/algorithm.go; numbers are doubles, every
-- value stays below 2^53.
--
-- Each algorithm file defines one function
--
--   decide(key, n, t, b, cost, now, maxdelay, countrefused)
--     -> allowed, remaining, retry, reset, delay, write
--
-- that reads the key's state and returns the decision (retry, reset and
-- delay in microseconds: limits.Result's RetryAfter, ResetAfter and Delay) and the write that would store its new state: a function
-- that performs it, or nil when the state does not change. Deciding writes
-- nothing; run.lua calls write only when the run is charged, so that a joint
-- run can decide all its limits before it charges any.

-- algorithms maps limits.Algorithm.ShortName to the algorithm's function;
-- each algorithm file registers itself.
local algorithms = {}

-- The library functions a decision calls, as upvalues: reading one is
-- cheaper than a global's field, and a decision reads them many times.
local floor, ceil, min, max = math.floor, math.ceil, math.min, math.max
local format, match = string.format, string.match
local call, tonumber = redis.call, tonumber

-- floordiv is floor(a/d) for d > 0, exact for integers below 2^53 even where
-- the division a/d rounds up to the next integer.
local function floordiv(a, d)
  local q = floor(a / d)
  if q * d > a then
    q = q - 1
  elseif (q + 1) * d <= a then
    q = q + 1
  end
  return q
end

-- num renders a number so that tonumber reads back the same double (Lua's
-- tostring keeps only 14 digits), for the numbers a state string holds. A
-- number passed to redis.call on its own needs nothing: Redis renders it
-- exactly itself.
local function num(x)
  return format('%.17g', x)
end

-- int is num for a number known to be an integer (a window, a count, an
-- instant in microseconds), twice as fast: this runs for every write.
local function int(x)
  return format('%d', x)
end

-- ttl_ms is a TTL of ttl microseconds (> 0) in milliseconds, rounded up, and
-- at least 2: a key may outlive its state by less than 2 ms, never the other
-- way round. Not 1 ms: PEXPIRE (and RESTORE ... ABSTTL) delete a key at once
-- when its expiry is already due by Redis's clock as the command checks it,
-- which a 1 ms TTL is whenever a millisecond ends between the command's two
-- clock reads (BenchmarkExpireRace counts those keys, and none with SET ...
-- PX or with this floor): a log lost in the middle of a script, whose later
-- hits would see it absent. A stale
-- state decides as an absent key, so a key kept longer changes nothing.
local function ttl_ms(ttl)
  return max(2, floordiv(ttl + 999, 1000))
end

-- charged mirrors charged in algorithm.go: count_refused makes a refused
-- positive hit consume anyway.
local function charged(countrefused, allowed, cost)
  return countrefused and not allowed and cost > 0
end

-- malformed aborts the script, before any write, on a state this build did
-- not write.
local function malformed(key)
  error({err = 'envoy-rls: malformed state under key ' .. key})
end

-- load returns the numeric fields (up to three) of the string state under
-- key, or nil for an absent key. A key of another type fails the script
-- with WRONGTYPE. Values, not a table: this runs for every decision.
local function load(key, pattern)
  local v = call('GET', key)
  if not v then
    return nil
  end
  local a, b, c = match(v, pattern)
  if not a then
    malformed(key)
  end
  return tonumber(a), tonumber(b), tonumber(c)
end

-- set_write is the write that stores value under key for ttl microseconds
-- (> 0) from now.
local function set_write(key, value, ttl)
  return function()
    call('SET', key, value, 'PX', ttl_ms(ttl))
  end
end

-- del_write is the write for a state equivalent to an absent key.
local function del_write(key)
  return function()
    call('DEL', key)
  end
end

-- window_key is the key of window w's counter of a window hit's key, as
-- windowKey in window.go builds it.
local function window_key(key, w)
  return key .. '@' .. int(w)
end

-- load_count returns a window counter's count, 0 for an absent key, read as
-- cap at most (false: no cap): the counter of window.go, which INCRBY keeps.
local function load_count(key, cap)
  local v = call('GET', key)
  if not v then
    return 0
  end
  local c = tonumber(v)
  if not c or c ~= floor(c) then
    malformed(key)
  end
  if cap and c > cap then
    c = cap
  end
  return max(c, 0)
end
