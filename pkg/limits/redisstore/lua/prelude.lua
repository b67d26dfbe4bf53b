-- Shared head of every script (prepended in Go). It mirrors the helpers of
-- pkg/limits/algorithm.go; numbers are doubles, every value stays below 2^53.
--
-- KEYS[1] = the key, exactly as the caller built it.
-- ARGV = N, T (microseconds), B, cost, now (microseconds; empty: Redis TIME).
-- Returns {allowed (0/1), remaining, reset (microseconds)}.
local key = KEYS[1]
local n = tonumber(ARGV[1])
local t = tonumber(ARGV[2])
local b = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local now
if ARGV[5] ~= nil and ARGV[5] ~= '' then
  now = tonumber(ARGV[5])
else
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end

-- floordiv is floor(a/d) for d > 0, exact for integers below 2^53 even where
-- the division a/d rounds up to the next integer.
local function floordiv(a, d)
  local q = math.floor(a / d)
  if q * d > a then
    q = q - 1
  elseif (q + 1) * d <= a then
    q = q + 1
  end
  return q
end

-- num renders a number so that tonumber reads back the same double (Lua's
-- tostring keeps only 14 digits).
local function num(x)
  return string.format('%.17g', x)
end

-- keep stores value until now + ttl (microseconds, > 0), rounded up to the
-- next millisecond: a key may outlive its state by less than a millisecond,
-- never the other way round.
local function keep(value, ttl)
  redis.call('SET', key, value, 'PX', num(floordiv(ttl + 999, 1000)))
end

-- load returns the fields of the stored state, or nil for an absent key.
local function load(pattern)
  local v = redis.call('GET', key)
  if not v then
    return nil
  end
  local f = {string.match(v, pattern)}
  if #f == 0 then
    return redis.error_reply('envoy-rls: malformed state under key')
  end
  for i = 1, #f do
    f[i] = tonumber(f[i])
  end
  return f
end
