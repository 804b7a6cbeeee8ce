-- queue: the ticket queue of a key's blocking waiters, first come first
-- served: a sorted set q of the waiting owners scored by arrival, and
-- beside it, in the hash qx, each owner's ticket, which says until when
-- (server ms) the owner keeps its place: a waiter that died or gave up
-- holds the queue up no longer. A ticket is 'deadline rest', or the
-- deadline alone (the quorum's).

-- enqueue(q, owner): owner's place in q, at its tail when it had none;
-- the second result is true when owner was added.
local function enqueue(q, owner)
  local place = redis.call('ZSCORE', q, owner)
  if place then return tonumber(place), false end
  local last = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')
  place = tonumber(last[2] or '0') + 1
  redis.call('ZADD', q, place, owner)
  return place, true
end

-- join(q, owner, score): owner in q at score, unless it is there already
-- (it keeps its first score): the quorum's queues, where every node
-- scores a waiter by the same first attempt's time.
local function join(q, owner, score)
  redis.call('ZADD', q, 'NX', score, owner)
end

-- ticket(q, qx, owner, life, rest): write owner's ticket in the hash qx,
-- its deadline now + life ms then rest, or the deadline alone when rest
-- is nil, and keep q and qx at least that long (they expire with their
-- last ticket).
local function ticket(q, qx, owner, life, rest)
  local tk = fmt(now + life)
  if rest then tk = tk .. ' ' .. rest end
  redis.call('HSET', qx, owner, tk)
  if redis.call('PTTL', q) < life then
    redis.call('PEXPIRE', q, life)
    redis.call('PEXPIRE', qx, life)
  end
end

-- head(q, qx, owner): the first owner in q whose ticket in qx has not run
-- out, after dropping those ahead of it whose ticket did; nil for none.
-- owner, the one asking, counts whatever its own ticket says: it is
-- there, alive, and where its ticket lapsed on some nodes of a quorum and
-- not on others, each of them still sees it at its place. The second
-- result counts the tickets dropped.
local function head(q, qx, owner)
  local dropped = 0
  local h = redis.call('ZRANGE', q, 0, 0)[1]
  while h and h ~= owner and tonumber(string.match(redis.call('HGET', qx, h) or '0', '^%d+') or '0') <= now do
    redis.call('ZREM', q, h)
    redis.call('HDEL', qx, h)
    dropped = dropped + 1
    h = redis.call('ZRANGE', q, 0, 0)[1]
  end
  return h, dropped
end
