-- ticket: a quorum waiter's ticket, in a queue's deadlines hash (see the
-- engine's queue.lua), reads 'deadline ttl n owner' after a vote for one
-- lock: the deadline (server ms), then the TTL (ms), number and owner of
-- the waiter's latest attempt whose vote this node refused, to which a
-- release hands the lock (hand.lua). A waiter numbers its attempts
-- upwards, so that a vote of an earlier one, landing late, neither takes
-- the ticket's place nor the lock handed to it. A set's vote writes the
-- deadline alone: its waiter is not handed a lock.

-- handed(qx, waiter): the deadline, TTL, number and owner of waiter's
-- ticket in qx; nil when it has none, or one that names no owner.
local function handed(qx, waiter)
  local dl, ttl, n, owner = string.match(redis.call('HGET', qx, waiter) or '', '^(%d+) (%d+) (%d+) (.+)$')
  if not owner then return nil end
  return tonumber(dl), tonumber(ttl), tonumber(n), owner
end
