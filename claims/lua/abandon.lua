-- abandon: give up a claim that may or may not have landed, and may still
-- be on its way (the caller's context ended, the exchange failed, or the
-- grant came too late to use).
--
-- KEYS[1]  the queue's items hash (see items.lua)
-- ARGV[1]  owner
-- ARGV[2]  how long to remember the owner as given up, ms
--
-- Records the owner in :gone, so that claim.lua refuses it if it lands
-- later (records that lapsed are dropped whenever one is added, and the
-- key expires with its last), and when the owner holds an item, returns
-- it to the front of :pending: nobody worked on it. Its token stays
-- raised. Publishes on :ready when it returned an item. Replies 1 when it
-- returned one.
bury(ARGV[1], tonumber(ARGV[2]), nil, true)
local owners = KEYS[1] .. ':owners'
local id = redis.call('HGET', owners, ARGV[1])
if not id then return 0 end
redis.call('HDEL', owners, ARGV[1])
if redis.call('ZREM', KEYS[1] .. ':active', id) == 0 then return 0 end
local pending = KEYS[1] .. ':pending'
local first = redis.call('ZRANGE', pending, 0, 0, 'WITHSCORES')[2]
local score = 0
if first then score = tonumber(first) - 1 end
redis.call('ZADD', pending, score, id)
redis.call('PUBLISH', KEYS[1] .. ':ready', '')
return 1
