-- publish: send a notice about a lock to whoever watches it.
--
-- KEYS[1]  the lock's name prefix (dlock:{KEY}), passed as a key so that a
--          cluster client sends the call to the master serving the lock's
--          slot; the script reads and writes no key
-- ARGV[1]  the message
--
-- Replies the number of subscribers that received it on this server.
return redis.call('PUBLISH', KEYS[1] .. ':notice', ARGV[1])
