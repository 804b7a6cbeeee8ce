package single

import (
	"context"
	"fmt"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/notice"
)

// Publish sends message to every Watch of key, through the server (on a
// cluster, the master serving the lock's slot, which a cluster passes on
// to every node). It stores nothing.
func (lk *Locker) Publish(ctx context.Context, key, message string) error {
	if err := engine.CheckCall(ctx, key); err != nil {
		return err
	}
	if _, err := lk.n.Eval(ctx, notice.Script, []string{hashKey(key)}, message); err != nil {
		return fmt.Errorf("single: publish on %q on %s: %w", key, lk.n, ctxerr.Wrap(ctx, err))
	}
	return nil
}

// Watch delivers the messages Publish sends for key from now on, until
// stop is called; ctx bounds only the subscribing. It shares the Node's
// one subscription connection, and its hints: messages coalesce, and one
// published while that connection is broken is lost.
func (lk *Locker) Watch(ctx context.Context, key string) (<-chan string, func(), error) {
	if err := engine.CheckCall(ctx, key); err != nil {
		return nil, nil, err
	}
	msgs, stop, err := lk.n.Subscribe(ctx, notice.Channel(hashKey(key)))
	if err != nil {
		return nil, nil, fmt.Errorf("single: watch %q on %s: %w", key, lk.n, err)
	}
	return msgs, stop, nil
}
