-- abandon_all: give up a set's claim that may or may not have landed, and
-- may still be on its way: abandon.lua, for every key in KEYS.
--
-- KEYS     the locks' hashes
-- ARGV[1]  owner
-- ARGV[2]  how long to remember the owner as given up, ms
--
-- On every key: frees it when this owner holds it (handed on, as a release
-- does), records the owner in :gone so that claim_all.lua refuses it if it
-- lands later, and takes its ticket out of the queue. Replies how many
-- keys it freed.
for i = 1, #KEYS do
  K = KEYS[i]
  enrich(ARGV[2])
end
local released = 0
for i = 1, #KEYS do
  K = KEYS[i]
  local freed = false
  local r = redis.call('HMGET', K, 'owner', 'attempts', 'waiting', 'exp')
  if r[1] == ARGV[1] then
    free(r[2], r[4], r[3])
    freed = true
    released = released + 1
  end
  bury(ARGV[1], tonumber(ARGV[2]), redis.call('HGET', K, 'gone'))
  if redis.call('ZREM', K .. ':q', ARGV[1]) == 1 then
    redis.call('HDEL', K .. ':qx', ARGV[1])
    if redis.call('HINCRBY', K, 'waiting', -1) <= 0 then
      redis.call('HDEL', K, 'waiting')
    end
    if not freed then
      redis.call('PUBLISH', K .. ':released', '')
    end
  end
end
return released
