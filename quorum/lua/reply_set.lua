-- set_reply: the answer of a set's phase 1 without tokens: {status, pttl,
-- now µs, epoch record}. The keys of the set's second lock start at
-- KEYS[more] (see vote_set.lua).
local more = 6
local function set_reply(st, p, e, k)
  return {st, p, us, e}
end
