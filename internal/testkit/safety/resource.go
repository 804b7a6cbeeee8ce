package safety

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/dlockgo/dlock/fence"
)

// Resource is a protected register, the thing a lock guards in a fault
// test, that records every operation on it. Fenced (the default), a write
// is judged by a fence.Guard held in memory, or, with WithStore, by the
// fence.Store register in Redis; unfenced, every write is accepted, as by a
// resource that knows nothing of tokens. A Resource is safe for concurrent
// use.
type Resource struct {
	key      string
	store    Register
	unfenced bool

	mu    sync.Mutex
	guard fence.Guard
	value string
	token fence.Token
	h     History
}

// Option configures a Resource.
type Option func(*Resource)

// Register is a fenced register outside the process, at a key: Put
// writes value under t, or returns an error matching fence.ErrStale when
// a newer token wrote; Get reads the value and its token (ok false before
// any write). A fence.Store is one; the nemesis keeps one in PostgreSQL.
type Register interface {
	Put(ctx context.Context, key, value string, t fence.Token) error
	Get(ctx context.Context, key string) (value string, t fence.Token, ok bool, err error)
}

// WithStore keeps the register in s, at the Resource's key, instead of in
// memory: fenced writes are s.Put, reads s.Get.
func WithStore(s Register) Option { return func(r *Resource) { r.store = s } }

// Unfenced makes the Resource accept every write, whatever its token, in
// memory; WithStore is then ignored.
func Unfenced() Option { return func(r *Resource) { r.unfenced = true } }

// NewResource returns an empty Resource named key.
func NewResource(key string, opts ...Option) *Resource {
	r := &Resource{key: key}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Granted records that l's holder now holds it, valid for l.TTL() more by
// its own clock. Call it as soon as the lease is acquired (and again after
// an extension, which moves Until).
func (r *Resource) Granted(l Lease) {
	now := time.Now()
	g := Grant{Holder: l.Owner(), Token: l.Token(), At: now, Until: now.Add(l.TTL())}
	r.mu.Lock()
	r.h.Grants = append(r.h.Grants, g)
	r.mu.Unlock()
}

// Held records that l's holder still holds l, valid for l.TTL() more by
// its own clock: call it now and then while a lease that renews itself is
// held, so that its interval follows the renewals. It records nothing once
// the lease has ended (TTL 0): a lease does not come back.
func (r *Resource) Held(l Lease) {
	now := time.Now()
	ttl := l.TTL()
	if ttl <= 0 {
		return
	}
	g := Grant{Holder: l.Owner(), Token: l.Token(), At: now, Until: now.Add(ttl)}
	r.mu.Lock()
	r.h.Grants = append(r.h.Grants, g)
	r.mu.Unlock()
}

// Released records that l's holder gives l up: its interval ends now, even
// if its validity had time left. Call it before the release is sent: the
// next holder may be granted the lock as soon as the release arrives.
func (r *Resource) Released(l Lease) {
	rel := Release{Holder: l.Owner(), At: time.Now()}
	r.mu.Lock()
	r.h.Releases = append(r.h.Releases, rel)
	r.mu.Unlock()
}

// Write writes value under l's token and records the attempt. It returns
// an error matching fence.ErrStale when the fence refused the write, or the
// store's error when its outcome is unknown.
func (r *Resource) Write(ctx context.Context, l Lease, value string) error {
	op := Op{Kind: Write, Holder: l.Owner(), Token: l.Token(), Fenced: !r.unfenced, Value: value}
	op.Call = time.Now()
	op.ValidUntil = op.Call.Add(l.TTL())
	var err error
	switch {
	case r.unfenced:
		r.mu.Lock()
		r.value = value
		r.mu.Unlock()
	case r.store != nil:
		err = r.store.Put(ctx, r.key, value, op.Token)
	default:
		// Admit and the write happen under one lock: apart, a writer
		// admitted with an older token could overwrite a newer one.
		r.mu.Lock()
		if err = r.guard.Admit(r.key, op.Token); err == nil {
			r.value, r.token = value, op.Token
		}
		r.mu.Unlock()
	}
	op.Return = time.Now()
	op.Outcome, op.Err = outcome(err)
	r.record(op)
	return err
}

// Read returns the register's value and the token it was written under
// (empty and 0 before any fenced write), and records the read.
func (r *Resource) Read(ctx context.Context) (value string, t fence.Token, err error) {
	op := Op{Kind: Read, Call: time.Now()}
	if r.store != nil && !r.unfenced {
		value, t, _, err = r.store.Get(ctx, r.key)
	} else {
		r.mu.Lock()
		value, t = r.value, r.token
		r.mu.Unlock()
	}
	op.Return = time.Now()
	op.Value, op.Token = value, t
	op.Outcome, op.Err = outcome(err)
	r.record(op)
	return value, t, err
}

// History returns a copy of what the Resource recorded so far.
func (r *Resource) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return History{
		Grants:   slices.Clone(r.h.Grants),
		Releases: slices.Clone(r.h.Releases),
		Ops:      slices.Clone(r.h.Ops),
		Breaks:   slices.Clone(r.h.Breaks),
	}
}

// Check checks the history recorded so far; see Check.
func (r *Resource) Check() Report { return Check(r.History()) }

func (r *Resource) record(op Op) {
	r.mu.Lock()
	r.h.Ops = append(r.h.Ops, op)
	r.mu.Unlock()
}

func outcome(err error) (Outcome, error) {
	switch {
	case err == nil:
		return Accepted, nil
	case errors.Is(err, fence.ErrStale):
		return Refused, err
	default:
		return Unknown, err
	}
}
