-- abandon: give up a claim that may or may not have landed, and may still
-- be on its way (the caller's context ended, or the exchange failed).
--
-- KEYS[1]  the name's hash (see state.lua)
-- ARGV[1]  owner
-- ARGV[2]  how long to remember the owner as given up, ms
--
-- Gives up the owner's permit if it holds one and its ticket if it waits
-- (handing what that frees to the queue), and records the owner in P:gone
-- so that claim.lua refuses it if it lands later. The records are a sorted
-- set scored by the server time until which each holds: those that lapsed
-- are dropped whenever one is added, and the key expires with its last.
-- The hash's gone field tells claims to look: it, and so the hash, lasts
-- as long as the record. Replies 1 when it gave up a permit.
local released = 0
local v = redis.call('HGET', S, ARGV[1])
if v then
  drop(ARGV[1], v)
  released = 1
end
if redis.call('ZREM', Q, ARGV[1]) == 1 then
  redis.call('HDEL', QX, ARGV[1])
end
prune()
if redis.call('EXISTS', Q) == 1 then serve(nil) end
bury(ARGV[1], tonumber(ARGV[2]), st[3])
return released
