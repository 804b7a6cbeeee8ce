-- release: give a writer's or a reader's lease up.
--
-- KEYS[1]  the lock's hash (see state.lua)
-- ARGV[1]  owner
-- ARGV[2]  'w' for a writer, 'r' for a reader
-- ARGV[3]  token
--
-- Replies 1 when released, 0 when the lease was this owner's but had
-- ended (given up all the same), and the error DLSTALE <attempts> when the
-- owner holds no such lease. A writer's release run again after it
-- succeeded (a client re-sent it after its reply was lost) finds no owner
-- and attempts still at its token, and replies 1 again. A reader's run
-- again finds nothing to release, as for a reader whose lease ended and
-- was dropped: it replies DLSTALE with attempts at the reader's token, and
-- the client tells the two apart by its own clock (its lease is still
-- valid only if the server's had not ended either). A release that frees
-- the lock (the writer's, or the last reader's) wakes the waiters.
if ARGV[2] == 'w' then
  if st[2] ~= ARGV[1] or fmt(attempts) ~= ARGV[3] then
    if not st[2] and fmt(attempts) == ARGV[3] then return 1 end
    return stale(fmt(attempts))
  end
  redis.call('HDEL', P, 'owner', 'until')
  wake()
  if wuntil <= now then return 0 end
  return 1
end
local u = redis.call('ZSCORE', R, ARGV[1])
if not u or fmt(attempts) ~= ARGV[3] then return stale(fmt(attempts)) end
redis.call('ZREM', R, ARGV[1])
if readers() == 0 then wake() end
if tonumber(u) <= now then return 0 end
return 1
