-- head(ms): the waiter at the head of the queue KEYS[3] (scored by first
-- attempt times), dropping the heads whose deadline in KEYS[4] is not after
-- ms; false when none is left. Every node orders waiters by the same
-- scores, so the head is the same waiter on every node that holds the same
-- tickets.
local function head(ms)
  while true do
    local h = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not h then return false end
    if tonumber(redis.call('HGET', KEYS[4], h) or '0') > ms then return h end
    redis.call('ZREM', KEYS[3], h)
    redis.call('HDEL', KEYS[4], h)
  end
end
