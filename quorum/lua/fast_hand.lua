-- fast_hand: the head of hand.lua, run before the clock is read and the
-- library's functions are defined: the release of a lock nobody waits
-- for. When the lease is no failed attempt's (ARGV[6] empty), the key's
-- queue is empty and the owner holds the lock, it does what release.lua
-- and hand.lua's pass would: the waiter's ticket, if any, goes (with the
-- queue empty, the waiter's entry can only be in the deadlines), the lock
-- is deleted and the channel, when given, told '1'; the reply is 1. Any
-- other release goes on to them.
if (ARGV[6] or '') == '' and redis.call('EXISTS', KEYS[3]) == 0
    and redis.call('GET', KEYS[1]) == ARGV[1] then
  if ARGV[4] ~= '' then redis.call('HDEL', KEYS[4], ARGV[4]) end
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], '1') end
  return 1
end
