-- claim: hand the next pending item to an owner, under a lease.
--
-- KEYS[1]  the queue's items hash (see items.lua)
-- ARGV[1]  owner
-- ARGV[2]  TTL, ms
--
-- Replies {id, token, count} when it granted an item: the token is the
-- item's new fencing counter, max(token + 1, server time in µs), and count
-- the claims the item has had, this one included. Replies an integer when
-- nothing is pending: the ms until the earliest lease in :active ends, or
-- -1 when no item is claimed; -2 to an owner recorded in :gone (see
-- abandon.lua), whose claim arrived late and was given up.
--
-- Leases are judged by the server's clock alone. Before it takes an item,
-- the script returns to the back of :pending up to 16 claimed items whose
-- lease ended (oldest end first), forgetting their owners, so that no
-- separate process has to: expired claims go back as fast as claims are
-- made, sixteen times over.
--
-- A claim by an owner that holds an item with time left replies that item
-- and its token again, and runs the lease a TTL from now: the same claim
-- run again, by a client that re-sent it after its reply was lost. The
-- item it popped meanwhile goes back where it was. An owner whose item
-- ran out gets it back in :pending, and claims afresh.
--
-- The token rises by at least 1 at every claim of an item, whatever the
-- clock does, and across a Complete and a new Add of the same id while
-- the id's :floor:<id> lives (the idle TTL; the add takes it into the
-- entry and deletes it). The floor at the clock in µs keeps it rising
-- across a loss of the server's latest writes, or once the floor record
-- lapsed, as long as the clock has not stepped back past the tokens
-- handed out before (draw, in internal/engine/lua/token.lua). A counter
-- near 2^53, which only a hand edit makes, is refused with DLTOKEN, the
-- item left pending where it was.
local pending, active, owners = KEYS[1] .. ':pending', KEYS[1] .. ':active', KEYS[1] .. ':owners'
if gone(KEYS[1] .. ':gone', ARGV[1], now) then return -2 end
local ends = now + tonumber(ARGV[2])
local back -- the next order score at the back of :pending, once needed
local function requeue(id)
  local _, _, owner = item(redis.call('HGET', KEYS[1], id))
  if owner then redis.call('HDEL', owners, owner) end
  redis.call('ZREM', active, id)
  if not back then back = tail() end
  redis.call('ZADD', pending, back, id)
  back = back + 1
end
local due = redis.call('ZRANGEBYSCORE', active, '-inf', now, 'LIMIT', 0, 16)
for _, id in ipairs(due) do requeue(id) end
-- The owner is recorded with the item it takes, in one step that also
-- finds an owner holding one already (HSETNX): only then is it looked up.
local popped = redis.call('ZPOPMIN', pending)
local id = popped[1]
if not id or redis.call('HSETNX', owners, ARGV[1], id) == 0 then
  if id then redis.call('ZADD', pending, popped[2], id) end -- back where it was
  local mine = redis.call('HGET', owners, ARGV[1])
  if mine then
    local u = redis.call('ZSCORE', active, mine)
    local tok, n, owner = item(redis.call('HGET', KEYS[1], mine))
    if u and tonumber(u) > now and owner == ARGV[1] then
      redis.call('ZADD', active, 'XX', ends, mine)
      return {mine, tonumber(tok), n}
    end
    if u then requeue(mine) else redis.call('HDEL', owners, ARGV[1]) end
    popped = redis.call('ZPOPMIN', pending)
    id = popped[1]
    if id then redis.call('HSET', owners, ARGV[1], id) end
  end
  if not id then
    local first = redis.call('ZRANGE', active, 0, 0, 'WITHSCORES')[2]
    if first then return math.max(tonumber(first) - now, 0) end
    return -1
  end
end
local tok, n = item(redis.call('HGET', KEYS[1], id))
local a, bad = draw(tok, 'item ' .. id .. ': token')
if not a then
  redis.call('ZADD', pending, popped[2], id) -- back where it was
  redis.call('HDEL', owners, ARGV[1])
  return bad
end
n = (n or 0) + 1
redis.call('HSET', KEYS[1], id, fmt(a) .. ' ' .. n .. ' ' .. ARGV[1])
redis.call('ZADD', active, ends, id)
if back and redis.call('EXISTS', pending) == 1 then
  -- Items this claim returned wait: wake the other claimers.
  redis.call('PUBLISH', KEYS[1] .. ':ready', '')
end
return {id, a, n}
