-- release: give the lock up.
--
-- KEYS[1]  the lock's hash
-- ARGV[1]  owner
-- ARGV[2]  token
--
-- Replies 1 when released, 0 when the lease was this owner's but had
-- expired (cleared all the same), and the error DLSTALE <attempts> when it
-- is not this owner's. A release run again after it succeeded finds no
-- owner and attempts still at its token (nobody claimed since), and replies
-- 1 again. The release is published only when someone waits (the waiting
-- field is there): every blocking waiter holds a ticket from its first
-- refused attempt on, before it subscribes, and one without a ticket polls.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = redis.call('HMGET', KEYS[1], 'owner', 'attempts', 'until', 'waiting')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] then
  if not r[1] and r[2] == ARGV[2] then return 1 end
  return redis.error_reply('DLSTALE ' .. (r[2] or '0'))
end
redis.call('HDEL', KEYS[1], 'owner', 'until')
if r[4] then redis.call('PUBLISH', KEYS[1] .. ':released', '') end
if tonumber(r[3]) <= now then return 0 end
return 1
