-- decide_run decides a run of hits at one instant, then charges it; every
-- script ends by calling it (single.lua for one run, batch.lua for many). A
-- single hit is a run of one.
--
-- The run's hits are KEYS[k0+1..k0+count], one key per hit, and seven ARGV
-- fields per hit from ARGV[a0+1]: algorithm (limits.Algorithm.ShortName), N,
-- T in microseconds, B (limits.Limit.Capacity), cost, the longest delay in
-- microseconds (0: no bound), count_refused (1 or 0). now is in
-- microseconds.
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
-- in microseconds. A failure (a key of another type, a malformed state)
-- raises an error.

-- server_now is the Redis server's TIME in microseconds.
local function server_now()
  local tm = call('TIME')
  return tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end

-- snapshot is what a key holds, to restore it exactly.
local function snapshot(key)
  return {call('DUMP', key), call('PEXPIRETIME', key)}
end

local function restore(key, s)
  call('DEL', key)
  if s[1] then
    if s[2] >= 0 then
      call('RESTORE', key, s[2], s[1], 'ABSTTL')
    else
      call('RESTORE', key, 0, s[1])
    end
  end
end

-- decide_hit decides the hit on key whose fields follow ARGV[a], and
-- returns the algorithm's answer and whether the limit counts refused hits.
local function decide_hit(key, a, now)
  local decide = algorithms[ARGV[a + 1]]
  if not decide then
    error({err = 'envoy-rls: no algorithm ' .. tostring(ARGV[a + 1]) .. ' in this script'})
  end
  local countrefused = ARGV[a + 7] == '1'
  local allowed, remaining, reset, delay, write = decide(key,
    tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]),
    tonumber(ARGV[a + 5]), now, tonumber(ARGV[a + 6]), countrefused)
  return allowed, remaining, reset, delay, write, countrefused
end

local function decide_run(k0, count, a0, now)
  if count == 1 then
    -- A lone hit, by far the most common run: no repeated key, no tables.
    local allowed, remaining, reset, delay, write, countrefused = decide_hit(KEYS[k0 + 1], a0, now)
    if write and (allowed or countrefused) then
      write()
    end
    return {allowed and 1 or 0, remaining, reset, delay}
  end
  local repeats = {}
  for i = k0 + 1, k0 + count do
    repeats[KEYS[i]] = (repeats[KEYS[i]] or 0) + 1
  end
  -- kept[key] is the snapshot to restore if the run is refused, for a
  -- repeated key written by a limit that does not count refused hits.
  local kept, dirty = {}, {}

  local out, writes, refused = {}, {}, false
  for i = 1, count do
    local key = KEYS[k0 + i]
    local allowed, remaining, reset, delay, write, countrefused = decide_hit(key, a0 + 7 * (i - 1), now)
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
  for i = 1, count do
    local key = KEYS[k0 + i]
    if refused and dirty[key] then
      restore(key, kept[key])
      dirty[key] = nil
    end
    if writes[i] and (not refused or ARGV[a0 + 7 * i] == '1') then
      writes[i]()
    end
  end
  return out
end
