-- stats: count a queue's items.
--
-- KEYS[1]  the queue's items hash (see items.lua)
--
-- Replies {pending, claimed, claimed with their lease run out by the
-- server's clock and not yet returned (see claim.lua)}. Changes nothing.
local active = KEYS[1] .. ':active'
return {redis.call('ZCARD', KEYS[1] .. ':pending'), redis.call('ZCARD', active),
  redis.call('ZCOUNT', active, '-inf', now)}
