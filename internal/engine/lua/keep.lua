-- keep: the idle expiry of a key's hash, K, and of the keys beside it.

-- keep(exp, life): keep K for at least life ms from now (a string; '0':
-- for ever), moving its expiry only when it must. exp is the hash's exp
-- field: the expiry last set, server ms, or 'inf' after a PERSIST. A hash
-- whose expiry is due before now + life gets now + 1.5 × life, so that
-- the next hours of claims and extensions set none: the hash outlives its
-- last lease by between the idle life and one and a half times it. keep
-- returns the new exp field, to be written with the script's HSET, and
-- the ms to expire in (see expire); nil when the expiry stays. exp is the
-- real expiry: every script that sets one writes it, and none moves it
-- earlier, but for a hash kept for ever (exp 'inf') that a Locker with a
-- finite idle life claims.
local function keep(exp, life)
  if life == '0' then
    if exp == 'inf' then return nil end
    return 'inf'
  end
  local ms = tonumber(life)
  if exp and exp ~= 'inf' and tonumber(exp) >= now + ms then return nil end
  local set = ms + math.floor(ms / 2)
  return fmt(now + set), set
end

-- expire(exp, ms): apply what keep returned, after the HSET: an expiry
-- set on a hash that does not exist yet is lost.
local function expire(exp, ms)
  if exp == 'inf' then
    redis.call('PERSIST', K)
  elseif exp then
    redis.call('PEXPIRE', K, ms)
  end
end

-- kept(exp, life): keep and expire in one step, with an HSET of its own;
-- returns the exp field as it now stands.
local function kept(exp, life)
  local e, ms = keep(exp, life)
  if not e then return exp end
  redis.call('HSET', K, 'exp', e)
  expire(e, ms)
  return e
end

-- stretch(ms, ...): the keys given last at least ms more: when the first
-- of them expires sooner, each is set to expire in 1.5 × ms, so that the
-- next grants and extensions for a while set none.
local function stretch(ms, ...)
  local keys = {...}
  if redis.call('PTTL', keys[1]) < ms then
    ms = ms + math.floor(ms / 2)
    for i = 1, #keys do
      redis.call('PEXPIRE', keys[i], ms)
    end
  end
end
