-- abandon: give up a claim that may or may not have landed, and may still
-- be on its way (the caller's context ended, or the exchange failed).
--
-- KEYS[1]  the lock's hash (see state.lua)
-- ARGV[1]  owner
-- ARGV[2]  how long to remember the owner as given up, ms
--
-- Gives up the owner's lease, a writer's or a reader's, if it holds one,
-- and its ticket if it waits (waking the waiters when that may let one
-- in), and records the owner in P:gone so that claim.lua refuses it if it
-- lands later. The records are a sorted set scored by the server time
-- until which each holds: those that lapsed are dropped whenever one is
-- added, and the key expires with its last. The hash's gone field tells
-- claims to look: it, and so the hash, lasts as long as the record.
-- Replies 1 when it gave up a lease.
local released, changed = 0, false
if st[2] == ARGV[1] then
  redis.call('HDEL', P, 'owner', 'until')
  released, changed = 1, true
end
if redis.call('ZREM', R, ARGV[1]) == 1 then
  released = 1
  changed = changed or readers() == 0
end
if dequeue(ARGV[1]) == 1 then changed = true end
drop_lapsed()
if changed then wake() end
bury(ARGV[1], tonumber(ARGV[2]), st[5])
return released
