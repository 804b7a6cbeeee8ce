package dlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/ratelimit"
	"github.com/dlockgo/dlock/rwlock"
	"github.com/dlockgo/dlock/single"
)

// belowFloor reports whether b is Redis before 7.0, the documented floor.
func belowFloor(t *testing.T, b redistest.Build) bool {
	t.Helper()
	if b.Name != "redis" {
		return false
	}
	major, err := strconv.Atoi(strings.SplitN(b.Version, ".", 2)[0])
	require.NoError(t, err, "redis_version %q", b.Version)
	return major < 7
}

// TestServerFloor: what runs on a server below Redis 7.0 and what refuses
// at once with DLVERSION, each strategy and primitive used once. On the
// server DLOCK_SERVER names: below the floor (scripts/test-redis62.sh runs
// it on Redis 6.2), every case must do as the table says; at or above it,
// every case must work, the guarded quorum's version check included (its
// fresh nodes sit out, which only a vote past that check says).
// docs/deployment.md lists the table.
func TestServerFloor(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			srvs := redistest.StartN(t, 3)
			build := srvs[0].Build()
			below := belowFloor(t, build)
			t.Logf("server: %s %s, below the floor: %v", build.Name, build.Version, below)
			nodes := make([]node.Node, len(srvs))
			for i, s := range srvs {
				nodes[i] = redistest.NodeFor(t, c, s.Addr())
			}
			n := nodes[0]
			newSingle := func(t *testing.T) *single.Locker {
				lk, err := single.New(n)
				require.NoError(t, err, "single.New")
				return lk
			}
			newQuorum := func(t *testing.T, opts ...option.Option) *quorum.Locker {
				lk, err := quorum.New(nodes, append([]option.Option{option.NodeTimeout(250 * time.Millisecond)}, opts...)...)
				require.NoError(t, err, "quorum.New")
				t.Cleanup(func() { _ = lk.Close() })
				return lk
			}
			cases := []struct {
				name    string
				refused bool // below the floor: DLVERSION at once; else it works there
				run     func(t *testing.T, ctx context.Context) error
			}{
				{"single lock", false, func(t *testing.T, ctx context.Context) error {
					l, err := newSingle(t).TryAcquire(ctx, "floor-single")
					if err != nil {
						return err
					}
					return l.Release(ctx)
				}},
				{"single set", false, func(t *testing.T, ctx context.Context) error {
					l, err := newSingle(t).TryAcquireAll(ctx, []string{"floor-a", "floor-b"})
					if err != nil {
						return err
					}
					return l.Release(ctx)
				}},
				{"fence store", false, func(t *testing.T, ctx context.Context) error {
					s := fence.NewStore(n)
					if err := s.Put(ctx, "floor-fence", "v", 7); err != nil {
						return err
					}
					v, tok, ok, err := s.Get(ctx, "floor-fence")
					if err == nil && (v != "v" || tok != 7 || !ok) {
						t.Errorf("Get = %q, %v, %v; want v, 7, true", v, tok, ok)
					}
					return err
				}},
				{"election", false, func(t *testing.T, ctx context.Context) error {
					e, err := election.New(newSingle(t), "floor-office")
					require.NoError(t, err, "election.New")
					term, err := e.Campaign(ctx, "me")
					if err != nil {
						return err
					}
					return term.Resign(ctx)
				}},
				{"permits", false, func(t *testing.T, ctx context.Context) error {
					s, err := permits.New(n)
					require.NoError(t, err, "permits.New")
					l, err := s.TryAcquire(ctx, "floor-permits", 1)
					if err != nil {
						return err
					}
					return l.Release(ctx)
				}},
				{"claims", false, func(t *testing.T, ctx context.Context) error {
					q, err := claims.New(n, "floor-claims")
					require.NoError(t, err, "claims.New")
					if err := q.Add(ctx, "job"); err != nil {
						return err
					}
					cl, err := q.Claim(ctx)
					if err != nil {
						return err
					}
					return cl.Complete(ctx)
				}},
				{"rwlock", false, func(t *testing.T, ctx context.Context) error {
					lk, err := rwlock.New(n)
					require.NoError(t, err, "rwlock.New")
					l, err := lk.TryAcquire(ctx, "floor-rw")
					if err != nil {
						return err
					}
					return l.Release(ctx)
				}},
				{"ratelimit", false, func(t *testing.T, ctx context.Context) error {
					lim, err := ratelimit.New([]node.Node{n}, ratelimit.Limit{Rate: 10, Per: time.Second})
					require.NoError(t, err, "ratelimit.New")
					_, err = lim.Allow(ctx, "floor-rate")
					return err
				}},
				{"quorum, guarded", true, func(t *testing.T, ctx context.Context) error {
					_, err := newQuorum(t).TryAcquire(ctx, "floor-quorum")
					if !below {
						// Fresh nodes sit out: a vote that got past the check.
						if !errors.Is(err, quorum.ErrSitsOut) {
							t.Errorf("TryAcquire on fresh nodes: %v; want them to sit out", err)
						}
						return nil
					}
					return err
				}},
				{"quorum, guarded set", true, func(t *testing.T, ctx context.Context) error {
					_, err := newQuorum(t).TryAcquireAll(ctx, []string{"floor-qa", "floor-qb"})
					if !below {
						if !errors.Is(err, quorum.ErrSitsOut) {
							t.Errorf("TryAcquireAll on fresh nodes: %v; want them to sit out", err)
						}
						return nil
					}
					return err
				}},
				{"quorum, durable nodes", false, func(t *testing.T, ctx context.Context) error {
					l, err := newQuorum(t, option.DurableNodes(true)).TryAcquire(ctx, "floor-durable")
					if err != nil {
						return err
					}
					return l.Release(ctx)
				}},
				{"quorum, durable nodes, set", false, func(t *testing.T, ctx context.Context) error {
					l, err := newQuorum(t, option.DurableNodes(true)).TryAcquireAll(ctx, []string{"floor-da", "floor-db"})
					if err != nil {
						return err
					}
					return l.Release(ctx)
				}},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
					defer cancel()
					start := time.Now()
					err := tc.run(t, ctx)
					took := time.Since(start)
					switch {
					case below && tc.refused:
						if err == nil || !strings.Contains(err.Error(), "DLVERSION") {
							t.Fatalf("on %s %s: %v; want a DLVERSION refusal", build.Name, build.Version, err)
						}
						// At once: one attempt's round trip, no wait.
						if took > 2*time.Second {
							t.Errorf("DLVERSION after %v; want at once", took)
						}
					case err != nil:
						t.Fatalf("on %s %s: %v; want it to work", build.Name, build.Version, err)
					}
				})
			}
		})
	}
}
