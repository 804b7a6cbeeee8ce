-- reply: phase 1's answer without tokens: {status, pttl, now µs, epoch
-- record}.
local function reply(st, p, e)
  return {st, p, us, e}
end
