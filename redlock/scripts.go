package redlock

import "github.com/dlockgo/dlock/node"

// Tokens and counters are compared as Lua numbers (exact below 2^53) but
// always stored from the caller's decimal string: Lua would write a large
// number in exponent form.

// Status of an acquire script's reply.
const (
	statusHeld   = 0 // held by another owner
	statusSet    = 1 // set for the caller's owner
	statusQueued = 2 // free, but promised to an earlier waiter
	statusGone   = 3 // the caller's owner was given up: a late vote, refused
)

// queueHead is the Lua function that returns the waiter at the head of the
// queue KEYS[3] (scores: first-attempt times), dropping the heads whose
// deadline in KEYS[4] is not after ms, or false when none is left.
const queueHead = `
local function head(ms)
  while true do
    local h = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not h then return false end
    if tonumber(redis.call('HGET', KEYS[4], h) or '0') > ms then return h end
    redis.call('ZREM', KEYS[3], h)
    redis.call('HDEL', KEYS[4], h)
  end
end
`

// acquireBody is phase 1 on one node, shared by both acquire scripts. KEYS:
// lock, gone, queue, queue deadlines, epoch. ARGV: owner, TTL ms, waiter
// (empty for none), waiter's score, waiter's ticket life ms.
//
// It reads the node's clock and its epoch (stamping a missing one with the
// clock: a node that has just lost its data), then grants the lock to the
// owner when it is free, the owner was not given up (see releaseScript),
// and the queue is empty or its head is this waiter. A waiter granted
// keeps its ticket, at the head, until its lease is released (see
// releaseScript): taking it off on a grant left the nodes with different
// heads whenever the attempt failed overall. A waiter refused joins the
// queue (or stays, keeping its first score) and its ticket's deadline
// moves to now + its life. A
// waiter that has left (see leaveScript) is refused and does not join: its
// vote is a late one.
// Every node orders waiters by the same scores, so the head is the same
// waiter on every node that holds the same tickets.
//
// Locals left for the script's tail: st (a status above), p (the holder's
// PTTL, or 0), now (µs, as a number) and e (the epoch, as stored).
const acquireBody = queueHead + `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local e = redis.call('GET', KEYS[5])
if not e then
  e = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('SET', KEYS[5], e)
end
local ms = math.floor(now / 1000)
local st, p = 0, redis.call('PTTL', KEYS[1])
if p == -2 then
  p = 0
  local h = head(ms)
  if h and h ~= ARGV[3] then
    st = 2
  elseif redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 or ARGV[3] ~= '' and redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then
    return {3, 0, now, e}
  else
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    st = 1
  end
end
if st ~= 1 and ARGV[3] ~= '' then
  if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then return {3, 0, now, e} end
  redis.call('ZADD', KEYS[3], 'NX', ARGV[4], ARGV[3])
  redis.call('HSET', KEYS[4], ARGV[3], ms + tonumber(ARGV[5]))
end
`

// acquireScript is phase 1 without tokens (see acquireBody). Reply:
// {status, pttl, now µs, epoch}.
var acquireScript = node.NewScript(acquireBody + `
return {st, p, now, e}
`)

// acquireTokenScript is phase 1 with tokens: acquireBody, then the node's
// effective fence counter for the key, max(counter KEYS[6], node floor
// KEYS[7]), its high-water mark (KEYS[8]) and the epoch it was repaired
// for (KEYS[9]), read in the same script as the lock and the epoch, so a
// flush cannot fall between them. Reply: {status, pttl, now µs, epoch,
// counter, high, repaired}.
var acquireTokenScript = node.NewScript(acquireBody + `
local c = tonumber(redis.call('GET', KEYS[6]) or '0')
local f = tonumber(redis.call('GET', KEYS[7]) or '0')
if f > c then c = f end
return {st, p, now, e, c, redis.call('GET', KEYS[8]) or '0', redis.call('GET', KEYS[9]) or ''}
`)

// commitScript is phase 2: counter (KEYS[2]) = ARGV[2] only while the owner
// ARGV[1] holds the lock (KEYS[1]) and both the counter and the node's
// floor (KEYS[3]) are lower; the node's high-water mark (KEYS[4]) rises to
// it. Reply 1 when committed, 0 when not owner, -1 when the effective
// counter is not lower.
var commitScript = node.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local t = tonumber(ARGV[2])
if tonumber(redis.call('GET', KEYS[2]) or '0') >= t then return -1 end
if tonumber(redis.call('GET', KEYS[3]) or '0') >= t then return -1 end
redis.call('SET', KEYS[2], ARGV[2])
if t > tonumber(redis.call('GET', KEYS[4]) or '0') then redis.call('SET', KEYS[4], ARGV[2]) end
return 1
`)

// repairScript repairs a node that lost its data, if its epoch (KEYS[1])
// is still ARGV[1]: floor (KEYS[2]) = max(floor, ARGV[2]), high (KEYS[3])
// = max(high, floor), and the repair mark (KEYS[4]) = the epoch. Reply 1
// when repaired, 0 when the epoch changed (the node lost its data again).
var repairScript = node.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local f = redis.call('GET', KEYS[2]) or '0'
if tonumber(ARGV[2]) > tonumber(f) then
  f = ARGV[2]
  redis.call('SET', KEYS[2], f)
end
if tonumber(f) > tonumber(redis.call('GET', KEYS[3]) or '0') then redis.call('SET', KEYS[3], f) end
redis.call('SET', KEYS[4], ARGV[1])
return 1
`)

// extendScript sets the lock's expiry to ARGV[2] ms when the owner ARGV[1]
// holds it; a lock that expired stays expired. Reply 1 or 0.
var extendScript = node.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// remember is the Lua function that records id (an owner or a waiter) in
// the gone hash KEYS[2] for at least ARGV[3] ms.
const remember = `
local function remember(id)
  redis.call('HSET', KEYS[2], id, '1')
  if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
end
`

// releaseScript: KEYS lock, gone, queue, queue deadlines; ARGV owner,
// channel (empty for no message), ms to remember a given-up owner, the
// waiter the lease was granted to (empty for none). The waiter's ticket
// is taken off the queue and the waiter recorded as gone (a vote of its
// still on the way must not queue it again). It deletes the lock when the
// owner holds it and publishes on the channel. Otherwise, the owner's vote may still be on
// its way (a timed-out call runs when a stopped server resumes): the owner
// is recorded in the gone hash, which the acquire scripts check, so the
// late vote is refused instead of holding the lock for a TTL. Where the
// owner holds the lock its vote has already run, and there is nothing to
// record. Reply 1 when deleted, else 0.
var releaseScript = node.NewScript(remember + `
if ARGV[4] ~= '' then
  redis.call('ZREM', KEYS[3], ARGV[4])
  redis.call('HDEL', KEYS[4], ARGV[4])
  remember(ARGV[4])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], '1') end
  return 1
end
remember(ARGV[1])
return 0
`)

// leaveScript: KEYS lock, gone, queue, queue deadlines; ARGV waiter,
// channel, ms to remember it. A waiter that gives up leaves the queue and is recorded as gone, so that a vote of its still
// on the way cannot queue it again; when the lock is free, waiters are
// woken, since the next one may be waiting for this one. Reply 1.
var leaveScript = node.NewScript(remember + `
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
remember(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('PUBLISH', ARGV[2], '1') end
return 1
`)
