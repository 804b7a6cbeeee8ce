package dlock

import (
	"context"
	"errors"

	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/redlock"
	"github.com/dlockgo/dlock/single"
)

var (
	_ MultiLocker = (*single.Locker)(nil)
	_ MultiLocker = (*redlock.Locker)(nil)
	_ MultiLocker = (*opened)(nil)
)

// ErrNoMulti is the error of AcquireAll and TryAcquireAll on a Locker Open
// built over a strategy that has no all-or-nothing acquire of several keys.
var ErrNoMulti = errors.New("dlock: the strategy cannot acquire several keys at once")

// AcquireAll forwards to the strategy's AcquireAll.
func (o *opened) AcquireAll(ctx context.Context, keys []string, opts ...lease.Option) (*lease.Lease, error) {
	m, ok := o.Locker.(MultiLocker)
	if !ok {
		return nil, ErrNoMulti
	}
	return m.AcquireAll(ctx, keys, opts...)
}

// TryAcquireAll forwards to the strategy's TryAcquireAll.
func (o *opened) TryAcquireAll(ctx context.Context, keys []string, opts ...lease.Option) (*lease.Lease, error) {
	m, ok := o.Locker.(MultiLocker)
	if !ok {
		return nil, ErrNoMulti
	}
	return m.TryAcquireAll(ctx, keys, opts...)
}
