-- hand: a lease's release that hands the lock it frees to the head of the
-- key's queue, when the head's ticket names an attempt (ticket.lua),
-- so that the next holder needs no vote of its own (docs/quorum.md, "The
-- handoff"). It follows one epoch_*.lua and one reply*.lua, as a vote does,
-- and takes a vote's keys (KEYS[6] is the fence counter).
--
-- The grant is the vote the head's refused attempt would get now: the
-- node's epoch step runs as for a vote (a node that lost its data answers
-- so, and the waiter does not count it), the lock is set for the
-- attempt's owner for its TTL, cut to the ticket's deadline, and the
-- channel carries the vote's reply, 'owner|now µs|epoch record' and with
-- tokens '|counter|high|repaired', owner being the owner's first 32
-- characters (its random part). The attempt's vote ran here before: the
-- waiter counts the grant's lease from that attempt's start. An owner
-- given up (gone) is not handed the lock. Otherwise, or when the epoch
-- step fails, the channel carries '1': the lock came free.
local fence = KEYS[6]
local function pass(ch)
  local h = head(KEYS[3], KEYS[4], '')
  local dl, ttl, owner, _
  if h then dl, ttl, _, owner = handed(KEYS[4], h) end
  if owner and not gone(KEYS[2], owner, now) then
    local e = vote_epoch()
    if type(e) ~= 'table' then
      redis.call('SET', KEYS[1], owner, 'PX', math.min(ttl, dl - now))
      -- {1, 0, us, e[, counter, high, repaired]} as 'owner|us|e[|...]'
      local r = reply(1, 0, e)
      r[1], r[2] = string.sub(owner, 1, 32), fmt(us)
      table.remove(r, 3)
      if r[4] then r[4] = fmt(r[4]) end
      redis.call('PUBLISH', ch, table.concat(r, '|'))
      return
    end
  end
  redis.call('PUBLISH', ch, '1')
end
