// Package notice is the channel on which both strategies publish notices
// about a lock to whoever watches it (the Lockers' Publish and Watch): its name, next to the
// lock's own keys, and the script that publishes on it.
package notice

import (
	"embed"

	"github.com/dlockgo/dlock/internal/engine/lua"
)

// Script publishes ARGV[1] on the notice channel of the lock whose name
// prefix is KEYS[1], and replies how many subscribers of that server got
// it. It stores nothing.
var Script = lua.Script(lua.Spec{Name: "notice/publish", FS: luaFS, Body: []string{"publish.lua"}})

//go:embed lua
var luaFS embed.FS

// Channel returns the notice channel of the lock whose keys start with
// prefix (keyname.Single or keyname.Quorum of its key): it shares their
// hash tag, so on a cluster the notice goes through the lock's master.
func Channel(prefix string) string { return prefix + ":notice" }
