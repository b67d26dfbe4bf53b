-- decide_run decides a run of joint hits at one instant, then charges it;
-- the joint script (single.lua) ends by calling it.
--
-- The run's hits are KEYS[k0+1..k0+count], one key per hit; read(a0, i)
-- returns the fields of its i-th hit: the algorithm's function, N, T in
-- microseconds, B (limits.Limit.Capacity), cost, the longest delay in
-- microseconds (0: no bound), whether the limit counts refused hits, and a
-- bucket's native operation (bucket.lua) or a sliding log's member prefix.
-- argv_hit reads them as the script receives them (eight ARGV fields per hit
-- from ARGV[a0+1]). now is in microseconds.
--
-- Every hit is decided first. If all of them are allowed, every write is
-- applied; if any is refused, only the writes of the count_refused limits are
-- (their decision already holds the charged state), so that a refused run
-- consumes nothing else. A bucket has moved its state as it decided: a
-- refused run undoes that, unless its limit counts refused hits.
--
-- The keys of a run differ (each names its limit's index; the store refuses
-- a run that repeats one before sending it), so every hit reads its key as
-- the run found it.
--
-- Returns five values per hit: allowed (1 or 0), remaining, then retry,
-- reset and delay in microseconds; for a bucket, allowed, the state as the
-- hit found it (a string, empty for an absent key) and three zeros. A
-- failure (a key of another type, a malformed state) raises an error.

-- server_now is the Redis server's TIME in microseconds.
local function server_now()
  local tm = call('TIME')
  return tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end

-- algorithm returns the function of the algorithm named name
-- (limits.Algorithm.ShortName), or raises an error.
local function algorithm(name)
  local decide = algorithms[name]
  if not decide then
    error({err = 'envoy-rls: no algorithm ' .. tostring(name) .. ' in this script'})
  end
  return decide
end

-- argv_hit reads the i-th hit of a run whose eight fields per hit follow
-- ARGV[a0].
local function argv_hit(a0, i)
  local a = a0 + 8 * (i - 1)
  return algorithm(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]),
    tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6]), ARGV[a + 7] == '1', ARGV[a + 8]
end

-- decide_hit decides the i-th hit of the run, on key, and returns the
-- algorithm's answer and whether the limit counts refused hits.
local function decide_hit(key, read, a0, i, now)
  local decide, n, t, b, cost, maxdelay, countrefused, op = read(a0, i)
  local allowed, remaining, retry, reset, delay, write, undo = decide(key, n, t, b, cost, now, maxdelay, countrefused, op)
  return allowed, remaining, retry, reset, delay, write, undo, countrefused
end

local function decide_run(k0, count, a0, now, read)
  if count == 1 then
    -- A lone hit, by far the most common run: no tables.
    local allowed, remaining, retry, reset, delay, write, undo, countrefused = decide_hit(KEYS[k0 + 1], read, a0, 1, now)
    if write and (allowed or countrefused) then
      write()
    end
    if undo and not (allowed or countrefused) then
      undo()
    end
    return {allowed and 1 or 0, remaining, retry, reset, delay}
  end
  local out, writes, undos, countsrefused, refused = {}, {}, {}, {}, false
  for i = 1, count do
    local key = KEYS[k0 + i]
    local allowed, remaining, retry, reset, delay, write, undo, countrefused = decide_hit(key, read, a0, i, now)
    countsrefused[i] = countrefused
    undos[i] = undo or false
    local o = 5 * (i - 1)
    out[o + 1] = allowed and 1 or 0
    out[o + 2] = remaining
    out[o + 3] = retry
    out[o + 4] = reset
    out[o + 5] = delay
    if not allowed then
      refused = true
    end
    writes[i] = write or false
  end
  for i = 1, count do
    if writes[i] and (not refused or countsrefused[i]) then
      writes[i]()
    end
    if undos[i] and refused and not countsrefused[i] then
      undos[i]()
    end
  end
  return out
end
