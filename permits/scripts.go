package permits

import (
	"embed"

	"github.com/dlockgo/dlock/internal/engine"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons, each after lua/state.lua and the functions of the
// engine's library that they call (the server's clock, read once, judges
// every permit).
//
//go:embed lua
var luaFS embed.FS

// scripts are the transitions: claim replies {token, slot}, or {ms until
// a permit ends, place, 0}; extend and release reply 1 or the error
// DLSTALE <token>.
var scripts = engine.StateScripts("permits", luaFS)
