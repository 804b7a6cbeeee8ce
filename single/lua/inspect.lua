-- inspect: who holds the lock, with which token, for how long. Writes
-- nothing.
--
-- KEYS[1]  the lock's hash
--
-- Replies {owner (empty when none), attempts, ms left (<= 0 when nobody
-- holds the lock)}.
local r = redis.call('HMGET', KEYS[1], 'owner', 'attempts', 'until')
local left = 0
if r[1] and r[3] then left = tonumber(r[3]) - now end
return {r[1] or '', r[2] or '0', left}
