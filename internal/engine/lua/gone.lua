-- gone: the records of owners given up, so that a claim or a vote of
-- theirs that lands late (held up in a network path or behind a paused
-- server) is refused. A set of them is a sorted set scored by the server
-- ms until which each record holds.

-- remember(set, owner, ms, at): record owner in set as given up for ms
-- from at (server ms). The records that lapsed are dropped whenever one
-- is added, and the key expires with its last.
local function remember(set, owner, ms, at)
  redis.call('ZREMRANGEBYSCORE', set, '-inf', fmt(at))
  redis.call('ZADD', set, fmt(at + ms), owner)
  if redis.call('PTTL', set) < ms then
    redis.call('PEXPIRE', set, ms)
  end
end

-- gone(set, owner, at): whether set records owner as given up until
-- after at (server ms).
local function gone(set, owner, at)
  local s = redis.call('ZSCORE', set, owner)
  return s and tonumber(s) > at or false
end

-- bury(owner, ms, g, alone): remember owner as given up for ms in the
-- records of K, K..':gone', so that its claim, should it land later, is
-- refused (see buried). g is the hash's gone field as read (nil or false
-- for none): it tells claims to read :gone, so it must last as long as
-- the record, and so must the hash (one created here, by a claim that
-- never landed, expires with the record); a hash's expiry only ever moves
-- later, and its exp field follows it. alone writes the record alone (a
-- queue of claims reads :gone at every claim).
local function bury(owner, ms, g, alone)
  local upto = now + ms
  remember(K .. ':gone', owner, ms, now)
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
  return gone(K .. ':gone', owner, now)
end
