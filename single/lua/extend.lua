-- extend: keep a lease running for its owner, with its token.
--
-- KEYS[1]  the lock's hash
-- ARGV[1]  owner
-- ARGV[2]  token (the attempts it was granted)
-- ARGV[3]  how long a released key keeps its counter, ms (fast_release.lua)
-- ARGV[4]  TTL, ms
-- ARGV[5]  the hash's lifetime, ms ('0': for ever; see keep.lua)
--
-- Replies 1, or the error DLSTALE <attempts> unless owner and token match
-- and the lease is still running: an expired lease is never revived.
local r = redis.call('HMGET', KEYS[1], 'owner', 'attempts', 'until', 'exp')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] or not r[3] or tonumber(r[3]) <= now then
  return stale(r[2] or '0')
end
local exp, ms = keep(r[4], ARGV[5])
if exp then
  redis.call('HSET', KEYS[1], 'until', fmt(now + tonumber(ARGV[4])), 'exp', exp)
  expire(exp, ms)
else
  redis.call('HSET', KEYS[1], 'until', fmt(now + tonumber(ARGV[4])))
end
return 1
