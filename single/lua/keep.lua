-- K is the lock's hash the helpers below act on: KEYS[1], or, in a script
-- on several locks (claim_all.lua and the rest), each of KEYS in turn.
local K = KEYS[1]

-- keep(now, exp, life) and expire(exp, ms): keep the lock's hash
-- (K) for at least life ms from now (a string; '0': for ever),
-- moving its expiry only when it must. exp is the hash's exp field: the
-- expiry last set, server ms, or 'inf' after a PERSIST. A hash whose
-- expiry is due before now + life gets now + 1.5 × life, so that the next
-- hours of claims and extensions set none: the hash outlives its last
-- lease by between the idle TTL and one and a half times it. keep returns
-- the new exp field, to be written with the script's HSET, and the ms to
-- expire in; nil when the expiry stays. expire then applies it, after the
-- HSET: an expiry set on a hash that does not exist yet is lost. exp is
-- the real expiry: every script that sets one writes it (abandon.lua too),
-- and none moves it earlier, but for a hash kept for ever (exp 'inf') that
-- a Locker with a finite idle TTL claims.
local function keep(now, exp, life)
  if life == '0' then
    if exp == 'inf' then return nil end
    return 'inf'
  end
  local ms = tonumber(life)
  if exp and exp ~= 'inf' and tonumber(exp) >= now + ms then return nil end
  local set = ms + math.floor(ms / 2)
  return string.format('%.0f', now + set), set
end
local function expire(exp, ms)
  if exp == 'inf' then
    redis.call('PERSIST', K)
  elseif exp then
    redis.call('PEXPIRE', K, ms)
  end
end
