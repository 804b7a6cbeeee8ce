package single

import (
	"github.com/dlockgo/dlock/internal/engine/lua"
	"github.com/dlockgo/dlock/node"
)

// HashKey names the lock's hash on the server, for tests that look at it.
var HashKey = hashKey

// The scripts, for tests that run one transition by hand.
var (
	ClaimScript   = claimScript
	AbandonScript = abandonScript
	ReleaseScript = releaseScript
)

// LeaveScript gives up a waiter's place, for tests that run it by hand.
var LeaveScript = leaveScript

// HashClaimScript is the claim script without its lean head (v, the
// head's read of the key, stays nil): the hash's claim alone, as versions
// before the lean form ran it.
var HashClaimScript = hashClaimScript()

func hashClaimScript() *node.Script {
	src, err := lua.Source(lua.Spec{FS: luaFS, Body: []string{"claim.lua"}})
	if err != nil {
		panic(err)
	}
	return node.NewScript("local v\n" + src)
}
