-- reply: phase 1's answer without tokens: {status, pttl, now µs, epoch
-- record}.
local function reply(st, p, now, e)
  return {st, p, now, e}
end
