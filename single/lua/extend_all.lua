-- extend_all: keep the leases of a set running, all of them or none.
--
-- KEYS     the locks' hashes
-- ARGV[1]  owner
-- ARGV[2]  TTL, ms
-- ARGV[3]  each hash's lifetime, ms ('0': for ever; see keep.lua)
-- ARGV[4…] each key's token, in KEYS' order
--
-- Replies 1, or the error DLSTALE <attempts> of the first key whose owner
-- or token differs or whose lease ran out, having changed nothing: an
-- expired lease is never revived, and a set is extended whole or not at
-- all.
for i = 1, #KEYS do
  K = KEYS[i]
  enrich(ARGV[3])
end
local rs = {}
for i = 1, #KEYS do
  local r = redis.call('HMGET', KEYS[i], 'owner', 'attempts', 'until', 'exp')
  if r[1] ~= ARGV[1] or r[2] ~= ARGV[i + 3] or not r[3] or tonumber(r[3]) <= now then
    return stale(r[2] or '0')
  end
  rs[i] = r
end
local upto = fmt(now + tonumber(ARGV[2]))
for i = 1, #KEYS do
  K = KEYS[i]
  local exp, ms = keep(rs[i][4], ARGV[3])
  redis.call('HSET', K, 'until', upto)
  if exp then
    redis.call('HSET', K, 'exp', exp)
    expire(exp, ms)
  end
end
return 1
