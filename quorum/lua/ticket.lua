-- ticket: a quorum waiter's ticket, in a queue's deadlines hash (see the
-- engine's queue.lua), reads 'deadline ttl n token owner' after a vote for
-- one lock: the deadline (server ms), then the TTL (ms), number and owner
-- of the waiter's latest attempt whose vote this node refused, to which a
-- release hands the lock (hand.lua), and the token the release's grant
-- committed ('0' until one did; the owner is last, being any string). A
-- waiter's later attempt that takes the lock over (vote.lua) is named in
-- its place, with the token while the node's counter is still it, and
-- holds the lock with it as the earlier attempt would have. A waiter
-- numbers its attempts upwards, so that a vote of an earlier one, landing
-- late, neither takes the ticket's place nor the lock handed to it. A
-- set's vote writes the deadline alone: its waiter is not handed a lock.

-- handed(qx, waiter): the deadline, TTL, number, owner and granted token
-- of waiter's ticket in qx; nil when it has none, or one that names no
-- owner.
local function handed(qx, waiter)
  local dl, ttl, n, t, owner = string.match(redis.call('HGET', qx, waiter) or '', '^(%d+) (%d+) (%d+) (%d+) (.+)$')
  if not owner then return nil end
  return tonumber(dl), tonumber(ttl), tonumber(n), owner, t
end

-- handing(ttl, n, t, owner): a ticket's text after its deadline, naming
-- the attempt numbered n of TTL ttl and owner owner, with the granted
-- token t ('0' for none).
local function handing(ttl, n, t, owner)
  return ttl .. ' ' .. n .. ' ' .. t .. ' ' .. owner
end
