-- The tail of every script: decides a run of hits at one instant, then
-- charges it. A single hit is a run of one.
--
-- KEYS = one key per hit. ARGV[1] = now in microseconds (empty: the server's
-- TIME), then seven fields per hit: algorithm (limits.Algorithm.ShortName),
-- N, T in microseconds, B (limits.Limit.Capacity), cost, the longest delay in
-- microseconds (0: no bound), count_refused (1 or 0).
--
-- Every hit is decided first. If all of them are allowed, every write is
-- applied; if any is refused, only the writes of the count_refused limits are
-- (their decision already holds the charged state), so that a refused run
-- consumes nothing else.
--
-- The keys of a run are expected to differ (each names its limit's index). A
-- key repeated in a run sees the decision before it, as separate hits would
-- and as the embedded store does: its writes are applied at once, after a
-- snapshot (DUMP, PEXPIRETIME) of what a refused run must leave, restored if
-- the run is refused.
--
-- Returns four integers per hit: allowed (1 or 0), remaining, reset and delay
-- in microseconds.
if #ARGV ~= 1 + 7 * #KEYS then
  return redis.error_reply('envoy-rls: want 1 + 7 arguments per key, got ' .. #ARGV .. ' for ' .. #KEYS .. ' keys')
end
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end

-- snapshot is what a key holds, to restore it exactly.
local function snapshot(key)
  return {redis.call('DUMP', key), redis.call('PEXPIRETIME', key)}
end

local function restore(key, s)
  redis.call('DEL', key)
  if s[1] then
    if s[2] >= 0 then
      redis.call('RESTORE', key, s[2], s[1], 'ABSTTL')
    else
      redis.call('RESTORE', key, 0, s[1])
    end
  end
end

local repeats = {}
for i = 1, #KEYS do
  repeats[KEYS[i]] = (repeats[KEYS[i]] or 0) + 1
end
-- kept[key] is the snapshot to restore if the run is refused, for a repeated
-- key written by a limit that does not count refused hits.
local kept, dirty = {}, {}

local out, writes, refused = {}, {}, false
for i = 1, #KEYS do
  local key, a = KEYS[i], 7 * (i - 1) + 1
  local decide = algorithms[ARGV[a + 1]]
  if not decide then
    return redis.error_reply('envoy-rls: no algorithm ' .. ARGV[a + 1] .. ' in this script')
  end
  local countrefused = ARGV[a + 7] == '1'
  local allowed, remaining, reset, delay, write = decide(key,
    tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]),
    tonumber(ARGV[a + 5]), now, tonumber(ARGV[a + 6]), countrefused)
  out[4 * i - 3] = allowed and 1 or 0
  out[4 * i - 2] = remaining
  out[4 * i - 1] = reset
  out[4 * i] = delay
  if not allowed then
    refused = true
  end
  if write and repeats[key] > 1 then
    if not kept[key] then
      kept[key] = snapshot(key)
    end
    write()
    write = nil
    if countrefused then
      kept[key], dirty[key] = snapshot(key), nil
    else
      dirty[key] = true
    end
  end
  writes[i] = write or false
end
for i = 1, #KEYS do
  local key = KEYS[i]
  if refused and dirty[key] then
    restore(key, kept[key])
    dirty[key] = nil
  end
  if writes[i] and (not refused or ARGV[7 * i + 1] == '1') then
    writes[i]()
  end
end
return out
