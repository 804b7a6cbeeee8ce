package single

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/acquire"
)

// Info is the state of one lock as its server sees it, at one instant.
type Info struct {
	Key string
	// Held reports whether an owner holds the lock and its lease has time
	// left on the server's clock.
	Held bool
	// Owner identifies the holder on the server; empty when not held.
	// Whoever knows it can release the lock: show it shortened.
	Owner string
	// Token is the holder's fencing token when Held; otherwise the last
	// token handed out for the key (0 if it was never locked).
	Token fence.Token
	// TTL is the time the holder has left by the server's clock; 0 when
	// not held.
	TTL time.Duration
}

// Inspect reports who holds the lock on key, with which token, and for how
// long, as the server sees it now. It changes nothing on the server.
func (lk *Locker) Inspect(ctx context.Context, key string) (Info, error) {
	if err := acquire.CheckContext(ctx); err != nil {
		return Info{}, err
	}
	if err := acquire.CheckKey(key); err != nil {
		return Info{}, err
	}
	r, err := lk.n.Eval(ctx, inspectScript, []string{hashKey(key)})
	if err != nil {
		return Info{}, fmt.Errorf("single: inspect %q on %s: %w", key, lk.n, acquire.CtxErr(ctx, err))
	}
	tok, err := strconv.ParseUint(r.Str(1), 10, 64)
	if err != nil {
		return Info{}, fmt.Errorf("single: inspect %q on %s: attempts %q: %w", key, lk.n, r.Str(1), err)
	}
	info := Info{Key: key, Token: fence.Token(tok)}
	if left := r.Int(2); r.Str(0) != "" && left > 0 {
		info.Held = true
		info.Owner = r.Str(0)
		info.TTL = time.Duration(left) * time.Millisecond
	}
	return info, nil
}
