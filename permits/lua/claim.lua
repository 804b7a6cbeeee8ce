-- claim: take one of the name's permits for an owner, or say how long
-- until one may come free.
--
-- KEYS[1]  the name's hash (see state.lua)
-- ARGV[1]  owner
-- ARGV[2]  N, the caller's number of permits: granted only while fewer
--          than N are live
-- ARGV[3]  TTL, ms
-- ARGV[4]  the hash's lifetime, ms: the TTL plus the idle TTL ('0': for ever)
-- ARGV[5]  for a blocking waiter, how long its ticket lasts, ms (absent for
--          TryAcquire)
-- ARGV[6]  for a blocking waiter, the ID of its Semaphore (hex), if any:
--          a release by the same Semaphore hands it its grant (see serve())
--
-- Replies {token, slot} when granted, and {ms until the first live permit
-- ends (0: unknown), place in the queue (1: its head; 0: not queued),
-- attempts} when refused. A waiter takes a permit handed to it only when
-- its token is above the attempts of its latest refusal: a grant made
-- before that refusal ran, heard late, has ended (see serve()).
--
-- A claim by an owner that holds a live permit replies that permit, which
-- then runs a TTL from now: the claim ran again (a client re-sent it after
-- its reply was lost), or a waiter was handed the permit and missed the
-- message. An owner recorded in P:gone (see abandon.lua) until a time
-- still ahead is refused: its claim is a late one, abandoned.
--
-- Waiters come first: with nobody waiting, a claim is granted at once when
-- fewer than N permits are live; otherwise a claim without a ticket is
-- granted only if serve() handed what it could to the queue and emptied
-- it, so a newcomer never takes a free permit from an older waiter, and a
-- waiter joins the queue (or refreshes its ticket's deadline) and is
-- granted when serve() reaches it. Both queue keys expire with their
-- latest ticket's deadline.
local owner, cap, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local v = redis.call('HGET', S, owner)
if v then
  local u = redis.call('ZSCORE', H, owner)
  if u and tonumber(u) > now then
    redis.call('ZADD', H, fmt(now + ttl), owner)
    stretch(ttl, H, S, SLOTS)
    exp = kept(exp, ARGV[4])
    local a, slot = string.match(v, '^(%d+) (%d+)$')
    return {tonumber(a), tonumber(slot)}
  end
end
prune()
if buried(owner, st[3]) then return {first_left(H), 0, attempts} end
local queued = redis.call('EXISTS', Q) == 1
if not queued and redis.call('ZCARD', H) < cap then
  local a, slot = give(owner, ttl, ARGV[4])
  return {a, slot}
end
if not ARGV[5] then
  if queued then
    serve(nil)
    if redis.call('EXISTS', Q) == 0 and redis.call('ZCARD', H) < cap then
      local a, slot = give(owner, ttl, ARGV[4])
      return {a, slot}
    end
  end
  return {first_left(H), 0, attempts}
end
local life = tonumber(ARGV[5])
enqueue(Q, owner)
local rest = ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4]
if ARGV[6] then rest = rest .. ' ' .. ARGV[6] end
ticket(Q, QX, owner, life, rest)
local mine = serve(owner)
if mine then return mine end
return {first_left(H), redis.call('ZRANK', Q, owner) + 1, attempts}
