-- extend_set: keep a lease on several locks on one node, all or none.
--
-- KEYS  for each lock: lock, and with tokens its fence counter
-- ARGV  owner, TTL ms, the counters' lifetime ms ('0': for ever), keys per
--       lock ('1', or '2' with tokens)
--
-- When the owner holds every lock, sets their expiry (and keeps the
-- counters as long past it, as extend.lua does). A lock that expired stays
-- expired, and the others are left as they are. Replies 1 or 0.
local s = tonumber(ARGV[4])
for j = 1, #KEYS, s do
  if redis.call('GET', KEYS[j]) ~= ARGV[1] then return 0 end
end
for j = 1, #KEYS, s do
  if s == 2 and ARGV[3] ~= '0' then redis.call('PEXPIRE', KEYS[j + 1], ARGV[3]) end
  redis.call('PEXPIRE', KEYS[j], ARGV[2])
end
return 1
