-- token: fencing tokens drawn from a counter.

-- draw_at(a, what, at): the token after counter a (a string, or nil for
-- none) at the server's time at (µs), max(a + 1, at): the +1 keeps tokens
-- rising on one server whatever its clock does; the floor keeps them
-- rising across a lost counter (a failover that lost the latest grants, a
-- hash that expired after its idle life) while the server's clock is not
-- behind the one that issued the lost tokens by more than the time
-- between the grants. A counter at or past 2^53 - 2^20, or not a number
-- (only a hand edit makes either), is not drawn from: draw_at returns nil
-- and the DLTOKEN error reply naming what, which the script returns
-- before it writes anything.
local function draw_at(a, what, at)
  local n = tonumber(a or '0')
  if not n or n >= 9007199254740992 - 1048576 then
    return nil, redis.error_reply('DLTOKEN ' .. what .. ' ' .. (a or '0') .. ' is near 2^53')
  end
  return math.max(n + 1, at)
end

-- draw(a, what): draw_at at the script's clock, us.
local function draw(a, what) return draw_at(a, what, us) end
