-- fast_claim: the head of claim.lua, run before the clock is read: the
-- claim of a key in the lean form, which reads the server's clock only to
-- draw a token.
--
-- A key that never had a waiter, a gone record or a Locker that keeps it
-- for ever is a string, not claim.lua's hash: 'token owner' while held,
-- expiring with the lease (PX: the server ends it, no until to judge),
-- and 'token' once released, expiring after the idle life (release.lua).
-- A free lock is taken with one SET; its token is draw_at's, max(counter +
-- 1, server µs) (see token.lua), the clock read for it alone. A claim by
-- the owner that holds it is its own run again: the lease runs a TTL from
-- now and the reply is its token. A plain claim on a lock held by another
-- is told the ms left. Anything else goes on to claim.lua: a hash (the
-- GET's error reply), a lifetime of '0' (kept for ever, which a lease's PX
-- cannot be), and a blocking waiter refused, which must queue (claim.lua
-- turns the string into the hash first: enrich, in lean.lua).
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'table' and ARGV[3] ~= '0' then
  local a, own
  if v then
    a, own = lean(v)
    if not a then a = v end
  end
  local left = 0
  if own then left = redis.call('PTTL', KEYS[1]) end
  if left > 0 then
    if own == ARGV[1] then
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
      return tonumber(a)
    end
    if not ARGV[4] then return {left, 0} end
  else
    local _, at = clock()
    local n, bad = draw_at(a, 'attempts', at)
    if not n then return bad end
    redis.call('SET', KEYS[1], fmt(n) .. ' ' .. ARGV[1], 'PX', ARGV[2])
    return n
  end
end
