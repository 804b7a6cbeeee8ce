-- release: give one owner's lock up on one node.
--
-- KEYS  lock, gone, queue, queue deadlines, fence counter (pass.lua); or a
--       vote's keys (hand.lua)
-- ARGV  owner, channel (empty for no message), ms to remember the owner as
--       given up ('0' not to), the waiter the lease was granted to (empty
--       for none), the lease's token (empty for none), for a failed
--       attempt of a waiter, the waiter (else empty or none), and for
--       hand.lua the idle TTL, ms ('-1': for ever; the life of the token a
--       grant commits, past the ticket's TTL)
--
-- The waiter's ticket is taken off the queue, and a lock a release handed
-- to the attempt the ticket named (an earlier attempt of the waiter, whose
-- later vote did not reach this node) is deleted and passed on. It deletes
-- the lock when the owner holds it (unless handed to a failed attempt,
-- below) and, given a channel, passes it on (pass: publish, or hand it to
-- the queue's head). Otherwise, where the owner's
-- vote may still be on its way (its call timed out or broke, and a stopped
-- server runs it when it resumes: the caller knows, and passes a time to
-- remember), the owner is recorded in the gone set (remember, in the
-- engine's gone.lua), which vote.lua checks, so the late vote is refused
-- instead of holding the lock for a TTL. Replies 1 when deleted; 2 when
-- the lock is gone and the counter is still at the lease's token (nobody
-- committed a token here since: this release run again after its reply
-- was lost, or a break whose token this node never got); else 0.
local v, o = redis.call('GET', KEYS[1]), nil
if ARGV[4] ~= '' then
  o = select(4, handed(KEYS[4], ARGV[4]))
  redis.call('ZREM', KEYS[3], ARGV[4])
  redis.call('HDEL', KEYS[4], ARGV[4])
end
if v and v == o and v ~= ARGV[1] then
  -- A lock handed to an earlier attempt of the lease's waiter, which its
  -- later attempt's vote never reached here: nobody counts on it, and it
  -- would refuse every vote until its TTL. It goes, as a lease's lock.
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then pass(ARGV[2]) end
  v = nil
end
if v == ARGV[1] and (ARGV[6] or '') ~= '' then
  -- A failed attempt's: its vote here was refused if the waiter's ticket
  -- names it, and the lock is then one a release handed it since, which
  -- the waiter may count on (hand.go): it stays.
  if select(4, handed(KEYS[4], ARGV[6])) == v then return 0 end
end
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then pass(ARGV[2]) end
  return 1
end
if ARGV[3] ~= '0' then remember(KEYS[2], ARGV[1], tonumber(ARGV[3]), (clock())) end
if not v and ARGV[5] ~= '' and redis.call('GET', fence) == ARGV[5] then return 2 end
return 0
