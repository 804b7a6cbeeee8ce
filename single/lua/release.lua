-- release: give the lock up.
--
-- KEYS[1]  the lock's hash
-- ARGV[1]  owner
-- ARGV[2]  token
-- ARGV[3]  how long a released key keeps its counter, ms (fast_release.lua)
--
-- Replies 1 when released, 0 when the lease was this owner's but had
-- expired (given up all the same), and the error DLSTALE <attempts> when
-- it is not this owner's. When someone waits, the lock goes straight to
-- the first live waiter, and the release channel says so (see
-- handoff.lua). A release run again after it succeeded finds no owner and
-- attempts still at its token (nobody claimed since), or the lock handed
-- on with freed at its token, and replies 1 again.
local r = redis.call('HMGET', KEYS[1], 'owner', 'attempts', 'until', 'waiting', 'exp', 'freed')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] then
  if not r[1] and r[2] == ARGV[2] or r[6] == ARGV[2] then return 1 end
  return stale(r[2] or '0')
end
free(r[2], r[5], r[4])
if tonumber(r[3]) <= now then return 0 end
return 1
