package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/internal/notice"
)

// Publish sends message to every Watch of key, through every node at once,
// each call bounded by the node timeout. It returns nil when a majority of
// the nodes took it: a Watch listens on a majority, and any two majorities
// share a node. It stores nothing.
func (lk *Locker) Publish(ctx context.Context, key, message string) error {
	if err := engine.CheckCall(ctx, key); err != nil {
		return err
	}
	if err := lk.begin(); err != nil {
		return err
	}
	defer lk.wg.Done()
	keys := []string{keyname.Quorum(key)}
	errs := make([]error, len(lk.nodes))
	var wg sync.WaitGroup
	for i, n := range lk.nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, lk.nodeTimeout(lk.cfg.TTL))
			defer cancel()
			if _, err := n.Eval(nctx, notice.Script, keys, message); err != nil {
				errs[i] = fmt.Errorf("%s: %w", lk.names[i], err)
			}
		})
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if len(lk.nodes)-failed >= lk.Quorum() {
		return nil
	}
	// The nodes' errors, their timeouts among them, are the nodes'
	// failures: the error matches a context's end only when ctx ended.
	return ctxerr.Wrap(ctx, fmt.Errorf("quorum: publish on %q reached %d of %d nodes, %d needed: %w",
		key, len(lk.nodes)-failed, len(lk.nodes), lk.Quorum(), ctxerr.Detach(errors.Join(errs...))))
}

// Watch delivers the messages Publish sends for key from now on, from
// every node, until stop is called or the Locker is closed; ctx bounds
// only the subscribing. It subscribes on every node at once and returns
// once a majority confirmed (the others join as they answer, in the
// background), or with an error when a majority cannot. A message comes
// once from each node that had it: up to once per node. Each node's
// subscription is a hint, as node.Node's Subscribe says.
func (lk *Locker) Watch(ctx context.Context, key string) (<-chan string, func(), error) {
	if err := engine.CheckCall(ctx, key); err != nil {
		return nil, nil, err
	}
	if err := lk.begin(); err != nil {
		return nil, nil, err
	}
	defer lk.wg.Done()
	channel := notice.Channel(keyname.Quorum(key))
	out := make(chan string, 1)
	wctx, cancel := context.WithCancel(lk.closing)
	var once sync.Once
	stop := func() { once.Do(cancel) }
	settled := make(chan error, len(lk.nodes))
	for i, nd := range lk.nodes {
		lk.wg.Go(func() {
			sctx, cancelSub := context.WithTimeout(wctx, lk.cleanupTimeout(lk.cfg.TTL))
			msgs, unsub, err := nd.Subscribe(sctx, channel)
			cancelSub()
			if err != nil {
				settled <- fmt.Errorf("%s: %w", lk.names[i], err)
				return
			}
			settled <- nil
			defer unsub()
			for {
				select {
				case <-wctx.Done():
					return
				case m := <-msgs:
					select {
					case out <- m:
					case <-wctx.Done():
						return
					}
				}
			}
		})
	}
	var errs []error
	for confirmed := 0; confirmed < lk.Quorum(); {
		select {
		case err := <-settled:
			if err == nil {
				confirmed++
				continue
			}
			errs = append(errs, err)
			if len(lk.nodes)-len(errs) < lk.Quorum() {
				stop()
				return nil, nil, ctxerr.Wrap(ctx, fmt.Errorf("quorum: watch %q: %d of %d nodes failed to subscribe, %d needed: %w",
					key, len(errs), len(lk.nodes), lk.Quorum(), ctxerr.Detach(errors.Join(errs...))))
			}
		case <-ctx.Done():
			stop()
			return nil, nil, fmt.Errorf("quorum: watch %q: %w", key, ctx.Err())
		}
	}
	return out, stop, nil
}
