package dlock

import (
	"context"

	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
)

// Notifier carries short messages about a lock, from those who hold or
// change it to those who watch it, on the lock's own servers: the server
// of a single Locker (on a cluster, the master of the lock's slot), every
// node of a quorum. Nothing is stored: a watcher hears only what is
// published while it watches. *single.Locker, *quorum.Locker and the
// Locker Open returns implement it; package election builds on it.
type Notifier interface {
	// Publish sends message to every Watch of key. It returns nil once
	// the servers a watcher listens on took it: the one server, or a
	// majority of a quorum's nodes.
	Publish(ctx context.Context, key, message string) error
	// Watch delivers the messages published for key from now on, until
	// stop is called (or, for a quorum, the Locker is closed); ctx bounds
	// only the subscribing. Delivery is a hint: messages coalesce (a
	// reader that falls behind finds the latest one pending), a message
	// published while a server's subscription connection is broken is
	// lost, and a quorum delivers a message once per node that had it.
	// The channel is never closed.
	Watch(ctx context.Context, key string) (messages <-chan string, stop func(), err error)
}

var (
	_ Notifier = (*single.Locker)(nil)
	_ Notifier = (*quorum.Locker)(nil)
	_ Notifier = (*opened)(nil)
)
