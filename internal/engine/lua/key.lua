-- key: the key the single-server primitives' functions act on.

-- K: the key's hash: KEYS[1], or, in a script on several keys, each of
-- KEYS in turn (the script sets it).
local K = KEYS[1]
