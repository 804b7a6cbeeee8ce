package single

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/lease"
)

// Inspect reports who holds the lock on key, with which token and
// metadata, and for how long, as the server sees it now: Info.Nodes holds
// the server's one answer. It changes nothing on the server.
func (lk *Locker) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if err := engine.CheckCall(ctx, key); err != nil {
		return lease.Info{}, err
	}
	r, err := lk.n.Eval(ctx, inspectScript, []string{hashKey(key)})
	if err != nil {
		return lease.Info{}, fmt.Errorf("single: inspect %q on %s: %w", key, lk.n, ctxerr.Wrap(ctx, err))
	}
	tok, err := strconv.ParseUint(r.Str(1), 10, 64)
	if err != nil {
		return lease.Info{}, fmt.Errorf("single: inspect %q on %s: attempts %q: %w", key, lk.n, r.Str(1), err)
	}
	info := lease.Info{Key: key, Token: fence.Token(tok), Quorum: 1}
	if left := r.Int(2); r.Str(0) != "" && left > 0 {
		info.Held = true
		info.Owner = r.Str(0)
		info.Metadata = engine.Metadata(info.Owner)
		info.TTL = time.Duration(left) * time.Millisecond
	}
	info.Nodes = []lease.NodeInfo{{Node: lk.n.String(), Owner: info.Owner,
		Metadata: info.Metadata, TTL: info.TTL, Counter: info.Token}}
	return info, nil
}
