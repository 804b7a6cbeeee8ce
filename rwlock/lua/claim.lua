-- claim: take the lock for a writer or a reader, or say how long until it
-- may come free.
--
-- KEYS[1]  the lock's hash (see state.lua)
-- ARGV[1]  owner
-- ARGV[2]  'w' for a writer, 'r' for a reader
-- ARGV[3]  TTL, ms
-- ARGV[4]  the hash's lifetime, ms: the TTL plus the idle TTL ('0': for ever)
-- ARGV[5]  for a blocking waiter, how long its ticket lasts, ms (absent for
--          a try)
--
-- Replies the token, a plain integer, when granted, and {ms until the
-- lease in the way may end (0: unknown), place in the queue (1: its head;
-- 0: not queued)} when refused.
--
-- A claim by an owner that holds the lock replies its token, and its lease
-- then runs a TTL from now: the claim ran again (a client re-sent it after
-- its reply was lost). An owner recorded in P:gone (see abandon.lua) until
-- a time still ahead is refused: its claim is a late one, abandoned.
--
-- First come, first served, in one queue for both kinds. A writer is
-- granted when no lease is live, neither a writer's nor a reader's, and
-- nobody waits ahead of it. A reader is granted when no writer's lease is
-- live and no writer waits ahead of it: the readers at the head of the
-- queue enter together, and a reader that arrives after a waiting writer
-- waits behind it. A claim without a ticket stands behind every waiter
-- (a writer's try is refused while anyone waits, a reader's while a
-- writer waits). A refused waiter joins the queue at its tail (or
-- refreshes its ticket's deadline, keeping its place).
--
-- A writer's token is max(attempts + 1, server time in µs), written to
-- attempts. So is the first reader's after a writer (rtoken, the readers'
-- last token, differs from attempts: a writer was granted since), and
-- that of a reader that finds no counter (never written, or expired after
-- its idle TTL). Any other reader shares attempts as it stands, the token
-- of the readers before it. The readers' token is thus above every
-- writer's granted before them, so that a fence they have shown it to
-- refuses a late write of the writer before them, whose lease ended
-- (paused past it) or who released with a write still on its way; and the
-- next writer's is above theirs. Readers with no writer between them
-- share a token: nothing is written that a fence must tell apart. A
-- reader on another server process than the readers' last raise (rrun:
-- the server restarted from a snapshot or an AOF, or a replica took over)
-- raises too: the writers granted since may have been lost with the old
-- process, and a counter floored at the clock is above their tokens under
-- the same clock condition as single's, where the kept one is not.
local owner, kind, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
if kind == 'w' then
  if writer == owner then
    redis.call('HSET', P, 'until', fmt(now + ttl))
    exp = kept(exp, ARGV[4])
    return attempts
  end
else
  local u = redis.call('ZSCORE', R, owner)
  if u and tonumber(u) > now then
    redis.call('ZADD', R, fmt(now + ttl), owner)
    stretch(ttl, R)
    exp = kept(exp, ARGV[4])
    return attempts
  end
end
if buried(owner, st[5]) then return {hint(), 0} end
local pruned = drop_lapsed()
local place = redis.call('ZSCORE', Q, owner)
local ok = false
if not writer then
  if kind == 'w' then
    if readers() == 0 then
      local head = redis.call('ZRANGE', Q, 0, 0)[1]
      ok = not head or head == owner
    end
  else
    local first = redis.call('ZRANGE', QW, 0, 0, 'WITHSCORES')
    ok = not first[2] or place and tonumber(first[2]) > tonumber(place)
  end
end
if ok then
  if place then dequeue(owner) end
  if kind == 'w' then
    attempts = drawn
    redis.call('HSET', P, 'attempts', fmt(attempts), 'owner', owner, 'until', fmt(now + ttl))
  else
    readers()
    local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
    if attempts == 0 or st[6] ~= fmt(attempts) or st[7] ~= run then
      attempts = drawn
      redis.call('HSET', P, 'attempts', fmt(attempts), 'rtoken', fmt(attempts), 'rrun', run)
    end
    redis.call('ZADD', R, fmt(now + ttl), owner)
    stretch(ttl, R)
  end
  exp = kept(exp, ARGV[4])
  -- A ticket that lapsed may have held up the waiters behind it.
  if pruned > 0 then wake() end
  return attempts
end
if pruned > 0 then wake() end
if not ARGV[5] then return {hint(), 0} end
local life = tonumber(ARGV[5])
if not place then
  place = enqueue(Q, owner)
  if kind == 'w' then redis.call('ZADD', QW, place, owner) end
end
redis.call('ZADD', QD, fmt(now + life), owner)
for _, k in ipairs({Q, QD, QW}) do
  local p = redis.call('PTTL', k)
  if p ~= -2 and p < life then redis.call('PEXPIRE', k, life) end
end
return {hint(), redis.call('ZRANK', Q, owner) + 1}
