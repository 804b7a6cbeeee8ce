-- release_set: give one owner's locks up on one node.
--
-- KEYS  for each lock: lock, gone, queue, queue deadlines, fence counter
-- ARGV  owner, '1' to publish each release on its lock's channel (empty
--       not to), ms to remember the owner as given up ('0' not to), the
--       waiter the lease was granted to (empty for none), then for each
--       lock: its channel and the lease's token (empty for none)
--
-- Each lock as release.lua releases one: the waiter's ticket goes, the
-- lock is deleted when the owner holds it, else the owner is remembered
-- as gone where asked. Replies 1 when any lock was deleted, or found gone
-- with its counter still at the lease's token (this release run again
-- after its reply was lost); else 0.
local ms -- the server's clock, read for the first record written
local released = 0
for j = 0, #KEYS / 5 - 1 do
  local b = 5 * j
  if ARGV[4] ~= '' then
    redis.call('ZREM', KEYS[b + 3], ARGV[4])
    redis.call('HDEL', KEYS[b + 4], ARGV[4])
  end
  local v = redis.call('GET', KEYS[b + 1])
  if v == ARGV[1] then
    redis.call('DEL', KEYS[b + 1])
    if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[5 + 2 * j], '1') end
    released = 1
  else
    if ARGV[3] ~= '0' then
      ms = ms or clock()
      remember(KEYS[b + 2], ARGV[1], tonumber(ARGV[3]), ms)
    end
    local tk = ARGV[6 + 2 * j]
    if not v and tk ~= '' and redis.call('GET', KEYS[b + 5]) == tk then released = 1 end
  end
end
return released
