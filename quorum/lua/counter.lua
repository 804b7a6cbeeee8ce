-- counter: a token committed to a lock's fence counter on one node.

-- commit_counter(counter, floor, high, s, life): sets the key counter to
-- the token s (its decimal string) where both the counter and the node's
-- floor are lower, keeping it life ms ('0': for ever), and raises the
-- high-water mark high to it. Returns 1 when committed, 0 when the counter
-- is s already, -1 when the counter or the floor is not lower. Tokens are
-- compared as Lua numbers (exact below 2^53) but stored from s: Lua would
-- write a large number in exponent form.
local function commit_counter(counter, floor, high, s, life)
  local t = tonumber(s)
  local c = tonumber(redis.call('GET', counter) or '0')
  if c == t then return 0 end
  if c > t or tonumber(redis.call('GET', floor) or '0') >= t then return -1 end
  setpx(counter, s, life)
  if t > tonumber(redis.call('GET', high) or '0') then redis.call('SET', high, s) end
  return 1
end
