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
-- tokens '|counter|high|repaired|token', owner being the owner's first 32
-- characters (its random part). The attempt's vote ran here before: the
-- waiter counts the grant's lease from that attempt's start. An owner
-- given up (gone) is not handed the lock. Otherwise, or when the epoch
-- step fails, the channel carries '1': the lock came free.
--
-- With tokens, the grant also commits the head's token, the released
-- lease's token (ARGV[5]) + 1, as commit.lua would: where the node's
-- effective counter is lower, the counter is set to it, for the ticket's
-- TTL plus ARGV[7] ms (the idle TTL; '-1': for ever), and the high-water
-- mark rises to it. The message's last field is the token so committed,
-- empty when none was: a waiter that a majority granted with one token
-- holds the lock with it, and commits nothing (docs/quorum.md, "The
-- handoff"; docs/models/quorum_grant_token.pml). The ticket keeps the
-- token, for a later attempt of the waiter that takes the lock over.
local fence = KEYS[6]

-- commit_grant(ttl): the head's token committed here, as a string, or ''.
local function commit_grant(ttl)
  if not KEYS[7] or (ARGV[5] or '') == '' or not ARGV[7] then return '' end
  local s = fmt(tonumber(ARGV[5]) + 1)
  local life = '0'
  if ARGV[7] ~= '-1' then life = fmt(ttl + tonumber(ARGV[7])) end
  if commit_counter(fence, KEYS[7], KEYS[8], s, life) == 1 then return s end
  return ''
end

local function pass(ch)
  local h = head(KEYS[3], KEYS[4], '')
  local dl, ttl, n, owner
  if h then dl, ttl, n, owner = handed(KEYS[4], h) end
  if owner and not gone(KEYS[2], owner, now) then
    local e = vote_epoch()
    if type(e) ~= 'table' then
      redis.call('SET', KEYS[1], owner, 'PX', math.min(ttl, dl - now))
      local t = commit_grant(ttl)
      if t ~= '' then
        redis.call('HSET', KEYS[4], h, fmt(dl) .. ' ' .. handing(fmt(ttl), fmt(n), t, owner))
      end
      -- {1, 0, us, e[, counter, high, repaired]} as 'owner|us|e[|...|token]'
      local r = reply(1, 0, e)
      r[1], r[2] = string.sub(owner, 1, 32), fmt(us)
      table.remove(r, 3)
      if r[4] then
        r[4] = fmt(r[4])
        r[#r + 1] = t
      end
      redis.call('PUBLISH', ch, table.concat(r, '|'))
      return
    end
  end
  redis.call('PUBLISH', ch, '1')
end
