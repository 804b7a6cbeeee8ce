-- leave: a waiter that gives up drops its ticket from the queue, and the
-- lock when a release handed it over unheard (see handoff.lua): it goes on
-- to the next waiter.
--
-- KEYS[1]  the lock's hash
-- ARGV[1]  owner
--
-- Replies 1 when there was a ticket or a lock to give up, else 0. A free
-- lock kept for the queue's head (its holder's lease ran out unreleased)
-- may have been kept for this waiter: the release channel then tells the
-- others to claim.
-- A lock in the lean form (see fast_claim.lua) has no queue.
if type(redis.pcall('GET', KEYS[1])) ~= 'table' then return 0 end
local r = redis.call('HMGET', KEYS[1], 'owner', 'attempts', 'until', 'waiting', 'exp')
if r[1] == ARGV[1] then
  free(r[2], r[5], r[4])
  return 1
end
if redis.call('ZREM', KEYS[1] .. ':q', ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[1] .. ':qx', ARGV[1])
if redis.call('HINCRBY', KEYS[1], 'waiting', -1) <= 0 then
  redis.call('HDEL', KEYS[1], 'waiting')
end
if not r[1] or tonumber(r[3] or '0') <= now then
  redis.call('PUBLISH', KEYS[1] .. ':released', '')
end
return 1
