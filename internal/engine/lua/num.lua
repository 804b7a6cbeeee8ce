-- num: numbers as the scripts write them.

-- fmt(n): n as the decimal integer HINCRBY would have written, so that
-- tokens compare as exact strings. Lua numbers are doubles, exact below
-- 2^53 (µs since 1970 are ~2^51).
local function fmt(n) return string.format('%.0f', n) end

-- setpx(key, v, ms): SET key to v, expiring after ms ('0': never).
local function setpx(key, v, ms)
  if ms == '0' then
    redis.call('SET', key, v)
  else
    redis.call('SET', key, v, 'PX', ms)
  end
end

-- stale(c): the refusal of a caller that no longer holds what it names:
-- the error reply 'DLSTALE c', c being the token or counter found
-- instead, which the client reads from it.
local function stale(c) return redis.error_reply('DLSTALE ' .. c) end
