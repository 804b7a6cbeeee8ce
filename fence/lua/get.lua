-- get: read a register's value and the token it was written under.
--
-- KEYS[1]  the register's hash (see put.lua)
--
-- Replies {value, token}, or an empty array when the register was never
-- written.
local r = redis.call('HMGET', KEYS[1], 'v', 't')
if not r[1] then return {} end
return {r[1], tonumber(r[2])}
