-- free(attempts, exp, waiting): the lock's owner gives the lock in K (see
-- the engine's key.lua) up, with the hash's attempts, exp and waiting
-- fields as read.
-- Nobody waiting: the lock is free. Else it goes at once to the first
-- waiter whose ticket is still live, skipping and dropping the others
-- (dead or gone waiters), as a claim of that waiter would take it: the
-- attempts raised the same way, the hash kept for the waiter's lifetime.
-- Its lease ends at the waiter's TTL or its ticket's deadline, whichever
-- comes first: a waiter that never hears of the grant (it died, or lost
-- the message and is slow to ask) holds the lock no longer than its
-- ticket held a free lock up before. The release channel carries the
-- grant, 'owner token' (the owner's first 32 characters, its random part),
-- so the waiter holds the lock one message after the release, without a
-- claim of its own, when the token is above the attempts its latest
-- refusal replied (a grant before that refusal, heard late, has ended);
-- an empty message says the lock came free. A waiter
-- that missed the message learns of its grant from its next claim (see
-- claim.lua). Tickets read 'deadline TTL lifetime' (server ms, ms, ms; see
-- claim.lua); a ticket of another shape is dropped, and its waiter claims
-- again. The hash's freed field keeps the token of the lease given up by
-- the latest handoff, so that a release run again is known (release.lua).
local function free(attempts, exp, waiting)
  local ch = K .. ':released'
  if not waiting then
    redis.call('HDEL', K, 'owner', 'until')
    return
  end
  local q, qx = K .. ':q', K .. ':qx'
  local n = tonumber(waiting)
  local a = draw(attempts, 'attempts')
  while a do
    local head = redis.call('ZRANGE', q, 0, 0)[1]
    if not head then break end
    local ticket = redis.call('HGET', qx, head) or ''
    redis.call('ZREM', q, head)
    redis.call('HDEL', qx, head)
    n = n - 1
    local deadline, ttl, life = string.match(ticket, '^(%d+) (%d+) (%d+)$')
    deadline = tonumber(deadline)
    if deadline and deadline > now then
      local upto = fmt(math.min(now + tonumber(ttl), deadline))
      local token = fmt(a)
      local e, ms = keep(exp, life)
      if n > 0 then
        redis.call('HSET', K, 'attempts', token, 'owner', head, 'until', upto, 'freed', attempts or '0', 'waiting', n)
      else
        redis.call('HSET', K, 'attempts', token, 'owner', head, 'until', upto, 'freed', attempts or '0')
        redis.call('HDEL', K, 'waiting')
      end
      if e then
        redis.call('HSET', K, 'exp', e)
        expire(e, ms)
      end
      redis.call('PUBLISH', ch, string.sub(head, 1, 32) .. ' ' .. token)
      return
    end
  end
  -- Nobody left to hand the lock to (or a counter near 2^53, which the next
  -- claim reports).
  if n > 0 then
    redis.call('HDEL', K, 'owner', 'until')
    redis.call('HSET', K, 'waiting', n)
  else
    redis.call('HDEL', K, 'owner', 'until', 'waiting')
  end
  redis.call('PUBLISH', ch, '')
end
