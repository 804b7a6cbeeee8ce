-- extend: keep a lease on one node.
--
-- KEYS  lock, and with tokens the fence counter
-- ARGV  owner, TTL ms, the counter's lifetime ms ('0': for ever)
--
-- Sets the lock's expiry when the owner holds it; a lock that expired
-- stays expired. With tokens the counter is kept as long, so that it
-- outlives the lease by the idle TTL. Replies 1 or 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if KEYS[2] and ARGV[3] ~= '0' then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
