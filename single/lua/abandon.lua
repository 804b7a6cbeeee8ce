-- abandon: give up a claim that may or may not have landed, and may still
-- be on its way (the caller's context ended, or the exchange failed).
--
-- KEYS[1]  the lock's hash (its gone field: see claim.lua)
-- ARGV[1]  owner
-- ARGV[2]  how long to remember the owner as given up, ms
--
-- Releases the lock if the owner holds it (handing it to the next waiter,
-- see handoff.lua), records the owner in
-- KEYS[1]..':gone' so that claim.lua refuses it if it lands later, and drops
-- its ticket from the queue. The gone records are a sorted set scored by
-- the server time until which each holds: each lapses on its own, those
-- that lapsed are dropped whenever one is added, and the key expires with
-- its last. The release comes first: while a cluster slot migrates, a
-- source that still has the hash but not :gone refuses the touch of :gone,
-- and the release has been done all the same. Replies 1 when it released.
enrich(ARGV[2])
local released = 0
local r = redis.call('HMGET', KEYS[1], 'owner', 'attempts', 'waiting', 'exp')
if r[1] == ARGV[1] then
  free(r[2], r[4], r[3])
  released = 1
end
bury(ARGV[1], tonumber(ARGV[2]), redis.call('HGET', KEYS[1], 'gone'))
local q = KEYS[1] .. ':q'
if redis.call('ZREM', q, ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[1] .. ':qx', ARGV[1])
  if redis.call('HINCRBY', KEYS[1], 'waiting', -1) <= 0 then
    redis.call('HDEL', KEYS[1], 'waiting')
  end
  if released == 0 then
    redis.call('PUBLISH', KEYS[1] .. ':released', '')
  end
end
return released
