-- release: give a permit up, and hand it on to the queue (see serve()).
--
-- KEYS[1]  the name's hash (see state.lua)
-- ARGV[1]  owner
-- ARGV[2]  token
-- ARGV[3]  slot
-- ARGV[4]  the ID of the releaser's Semaphore, if any: its waiters are
--          handed their grants from this reply (see serve())
--
-- Replies 1 when released, 0 when the permit was this owner's but had
-- ended (given up all the same): alone, or first in an array followed by
-- owner, token and slot of each grant it made to a waiter of the
-- releaser's Semaphore, which serve() did not publish. Replies the
-- error DLSTALE <the token last granted for the slot> when the owner
-- holds no such permit. That is also the reply to a release run again
-- after it succeeded (a client re-sent it after its reply was lost): the
-- server cannot tell it from a permit that ended and was dropped, and the
-- client tells them apart by its own clock (the lease is still valid only
-- if the server's permit had not ended either). The grants of a release
-- whose reply was lost reach their waiters at their next attempt.
local v = redis.call('HGET', S, ARGV[1])
if v ~= ARGV[2] .. ' ' .. ARGV[3] then
  return stale(redis.call('HGET', P, 's' .. ARGV[3]) or '0')
end
local u = tonumber(redis.call('ZSCORE', H, ARGV[1]) or '0')
drop(ARGV[1], v)
prune()
if redis.call('EXISTS', Q) == 1 then serve(nil, ARGV[4]) end
local was = 1
if u <= now then was = 0 end
if not handed then return was end
table.insert(handed, 1, was)
return handed
