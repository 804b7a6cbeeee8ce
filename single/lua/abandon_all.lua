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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local upto = now + tonumber(ARGV[2])
local released = 0
for i = 1, #KEYS do
  K = KEYS[i]
  local freed = false
  local r = redis.call('HMGET', K, 'owner', 'attempts', 'waiting', 'exp')
  if r[1] == ARGV[1] then
    free(t, now, r[2], r[4], r[3])
    freed = true
    released = released + 1
  end
  local gone = K .. ':gone'
  redis.call('ZREMRANGEBYSCORE', gone, '-inf', now)
  redis.call('ZADD', gone, upto, ARGV[1])
  if redis.call('PTTL', gone) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', gone, ARGV[2])
  end
  local g = redis.call('HGET', K, 'gone')
  local p = redis.call('PTTL', K)
  if p == -2 or p >= 0 and p < tonumber(ARGV[2]) then
    redis.call('HSET', K, 'gone', string.format('%.0f', math.max(upto, tonumber(g or '0'))),
      'exp', string.format('%.0f', upto))
    redis.call('PEXPIRE', K, ARGV[2])
  elseif not g or tonumber(g) < upto then
    redis.call('HSET', K, 'gone', string.format('%.0f', upto))
  end
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
