-- fast_release: the head of release.lua, run before the clock is read: the
-- release of a lock in the lean form (see fast_claim.lua), which reads no
-- clock.
--
-- ARGV[3]  how long the released key keeps its counter, ms ('0': for ever)
--
-- The owner's 'token owner' becomes 'token', expiring after ARGV[3]: the
-- counter the next claim draws from. A release run again after it
-- succeeded finds 'token' and replies 1 again; a lease that ran out
-- unreleased left no key (the server expired it), and the reply is 0; a
-- key held or drawn by another is DLSTALE with its token. A hash goes on
-- to release.lua.
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'table' then
  if v == ARGV[2] .. ' ' .. ARGV[1] then
    setpx(KEYS[1], ARGV[2], ARGV[3])
    return 1
  end
  if v == ARGV[2] then return 1 end
  if not v then return 0 end
  return stale(string.match(v, '^%d+') or '0')
end
