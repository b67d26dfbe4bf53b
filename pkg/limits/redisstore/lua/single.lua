-- The tail of a script for one run (a single hit, or the joint hits of one
-- descriptor). KEYS = one key per hit. ARGV[1] = now in microseconds (empty:
-- the server's TIME), then eight fields per hit, as argv_hit (run.lua)
-- reads them.
if #ARGV ~= 1 + 8 * #KEYS then
  return redis.error_reply('envoy-rls: want 1 + 8 arguments per key, got ' .. #ARGV .. ' for ' .. #KEYS .. ' keys')
end
local now = tonumber(ARGV[1])
if ARGV[1] == '' then
  now = server_now()
end
return decide_run(0, #KEYS, 1, now, argv_hit)
