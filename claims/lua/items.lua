-- items: the queue's items, and the functions its scripts hold when they
-- call them.
--
-- KEYS[1] is the queue's items hash: item id -> 'token count owner', the
-- item's latest claim: its token (the fencing counter, see claim.lua), how
-- many claims the item has had, and the claim's owner value (32 random hex
-- digits, then a space and metadata when some was given). An item has an
-- entry from its first claim until it is completed, or, an id added again
-- while its token floor lived, from that add. Named by appending to
-- KEYS[1]:
--   :pending   sorted set of ids waiting, scored by order (see tail)
--   :active    sorted set of claimed ids, scored by the end of the lease,
--              server ms
--   :owners    hash owner -> id, for each claim in :active
--   :gone      sorted set of abandoned owners, scored by the server ms
--              until which a late claim of theirs is refused
--   :done:<id> the token an item was completed with, expiring
--   :floor:<id> the same token, kept longer (the idle TTL): the floor of
--              the id's next token, should it be added again (add.lua
--              takes it into an entry, 'token 0 ', of the pending id)
--   :ready     channel: an item became pending
--
-- Numbers: tokens, µs since 1970, are about 1.7e15, exact in a Lua double
-- (below 2^53). A number passed to redis.call as a number is written
-- exactly (as %.17g writes it); one put into a string goes through fmt
-- (internal/engine/lua/num.lua), as Lua's own tostring keeps 14 digits.

-- item splits an items hash entry; nil for none.
local function item(v)
  if not v then return nil end
  local tok, n, owner = string.match(v, '^(%d+) (%d+) (.*)$')
  return tok, tonumber(n), owner
end

-- tail returns the order score of an item joining the back of :pending:
-- one more than the last pending item's, 0 when none is, and then true
-- when none is. Order needs no clock (one stepped back cannot reorder the
-- queue), and a script that needs none does not read it.
local function tail()
  local last = redis.call('ZRANGE', KEYS[1] .. ':pending', -1, -1, 'WITHSCORES')[2]
  if last then return tonumber(last) + 1, false end
  return 0, true
end
