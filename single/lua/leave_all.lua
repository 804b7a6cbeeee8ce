-- leave_all: a set's waiter gives up its places: leave.lua, for every key
-- in KEYS.
--
-- KEYS     the locks' hashes
-- ARGV[1]  owner
--
-- On every key: frees it when a release handed it to this owner (handed
-- on, as a release does), else takes its ticket out of the queue, waking
-- the others when the lock is free. Replies how many keys it acted on.
for i = 1, #KEYS do
  K = KEYS[i]
  enrich(0)
end
local acted = 0
for i = 1, #KEYS do
  K = KEYS[i]
  local r = redis.call('HMGET', K, 'owner', 'attempts', 'until', 'waiting', 'exp')
  if r[1] == ARGV[1] then
    free(r[2], r[5], r[4])
    acted = acted + 1
  elseif redis.call('ZREM', K .. ':q', ARGV[1]) == 1 then
    redis.call('HDEL', K .. ':qx', ARGV[1])
    if redis.call('HINCRBY', K, 'waiting', -1) <= 0 then
      redis.call('HDEL', K, 'waiting')
    end
    if not r[1] or tonumber(r[3] or '0') <= now then
      redis.call('PUBLISH', K .. ':released', '')
    end
    acted = acted + 1
  end
end
return acted
