-- gone: the records of owners given up, so that a claim of theirs that
-- lands late is refused.

-- bury(owner, ms, g, alone): remember owner as given up for ms, so that its
-- claim, should it land later (held up in a network path or behind a
-- paused server), is refused (see buried). The records are a sorted set,
-- K..':gone', scored by the server ms until which each holds: those that
-- lapsed are dropped whenever one is added, and the key expires with its
-- last. g is the hash's gone field as read (nil or false for none): it
-- tells claims to read :gone, so it must last as long as the record, and
-- so must the hash (one created here, by a claim that never landed,
-- expires with the record); a hash's expiry only ever moves later, and its
-- exp field follows it. alone writes the record alone (a queue of claims
-- reads :gone at every claim).
local function bury(owner, ms, g, alone)
  local set = K .. ':gone'
  local upto = now + ms
  redis.call('ZREMRANGEBYSCORE', set, '-inf', fmt(now))
  redis.call('ZADD', set, fmt(upto), owner)
  if redis.call('PTTL', set) < ms then
    redis.call('PEXPIRE', set, ms)
  end
  if alone then return end
  local p = redis.call('PTTL', K)
  if p == -2 or p >= 0 and p < ms then
    redis.call('HSET', K, 'gone', fmt(math.max(upto, tonumber(g or '0'))), 'exp', fmt(upto))
    redis.call('PEXPIRE', K, ms)
  elseif not g or tonumber(g) < upto then
    redis.call('HSET', K, 'gone', fmt(upto))
  end
end

-- buried(owner, g): whether owner's claim is refused as given up (bury),
-- g being the hash's gone field as read; a gone field that lapsed is
-- removed, and :gone, with nothing in it still live, is not read.
local function buried(owner, g)
  if not g then return false end
  if tonumber(g) <= now then
    redis.call('HDEL', K, 'gone')
    return false
  end
  local s = redis.call('ZSCORE', K .. ':gone', owner)
  return s and tonumber(s) > now or false
end
