package rwlock

import (
	"embed"

	"github.com/dlockgo/dlock/internal/engine"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons, each after lua/state.lua and the functions of the
// engine's library that they call (the server's clock, read once, judges
// every lease and ticket).
//
//go:embed lua
var luaFS embed.FS

var (
	// scripts are the transitions: claim replies the token, or {ms until
	// the lease in the way may end, place in the queue}; extend and
	// release reply 1 or the error DLSTALE <attempts>.
	scripts = engine.StateScripts("rwlock", luaFS)
	// inspectScript replies {attempts, writer, its ms left, live readers,
	// the last reader, its ms left}.
	inspectScript = engine.StateScript("rwlock", luaFS, "inspect")
)
