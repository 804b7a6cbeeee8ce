-- num: numbers as the scripts write them.

-- fmt(n): n as the decimal integer HINCRBY would have written, so that
-- tokens compare as exact strings. Lua numbers are doubles, exact below
-- 2^53 (µs since 1970 are ~2^51).
local function fmt(n) return string.format('%.0f', n) end
