-- token: fencing tokens drawn from a counter.

-- draw(a, what): the token after counter a (a string, or nil for none),
-- max(a + 1, server time in µs): the +1 keeps tokens rising on one server
-- whatever its clock does; the floor keeps them rising across a lost
-- counter (a failover that lost the latest grants, a hash that expired
-- after its idle life) while the server's clock is not behind the one
-- that issued the lost tokens by more than the time between the grants.
-- A counter at or past 2^53 - 2^20 (only a hand edit makes one) is not
-- drawn from: draw returns nil and the DLTOKEN error reply naming what,
-- which the script returns before it writes anything.
local function draw(a, what)
  local n = tonumber(a or '0')
  if n >= 9007199254740992 - 1048576 then
    return nil, redis.error_reply('DLTOKEN ' .. what .. ' ' .. (a or '0') .. ' is near 2^53')
  end
  return math.max(n + 1, us)
end
