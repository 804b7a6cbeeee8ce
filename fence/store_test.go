package fence_test

import (
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/examplemain"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(examplemain.With(m, 1)) }

func TestStore(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	for _, c := range redistest.Nodes(t, srv.Addr()) {
		t.Run(c.Name, func(t *testing.T) {
			s := fence.NewStore(c.Node)
			key := "res:" + c.Name
			if _, _, ok, err := s.Get(ctx, key); ok || err != nil {
				t.Fatalf("Get of an unwritten key: ok %v, err %v; want false, nil", ok, err)
			}
			steps := []struct {
				value string
				token fence.Token
				stale bool
			}{
				{"zero", 0, true},
				{"a", 5, false},
				{"a2", 5, false}, // the holder of 5 writes again
				{"old", 4, true},
				{"b", 9, false},
				{"old", 5, true},
			}
			want, wantTok := "", fence.Token(0)
			for i, st := range steps {
				err := s.Put(ctx, key, st.value, st.token)
				if got := errors.Is(err, fence.ErrStale); got != st.stale || (!st.stale && err != nil) {
					t.Fatalf("%d: Put(%q, %d) = %v; want stale %v", i, st.value, st.token, err, st.stale)
				}
				var se *fence.StaleError
				if st.stale && (!errors.As(err, &se) || se.Highest != wantTok || se.Token != st.token) {
					t.Fatalf("%d: Put(%q, %d) = %#v; want *StaleError{Highest: %d}", i, st.value, st.token, err, wantTok)
				}
				if !st.stale {
					want, wantTok = st.value, st.token
				}
				v, tok, ok, err := s.Get(ctx, key)
				if err != nil || ok != (wantTok != 0) || v != want || tok != wantTok {
					t.Fatalf("%d: Get = %q@%d ok %v err %v; want %q@%d", i, v, tok, ok, err, want, wantTok)
				}
			}
		})
	}
}

// TestStoreConcurrent: writers with tokens 1..n race on one key through both
// clients; the register ends with the largest token and its value.
func TestStoreConcurrent(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	nodes := redistest.Nodes(t, srv.Addr())
	const n = 100
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		s := fence.NewStore(nodes[i%len(nodes)].Node)
		wg.Go(func() {
			tok := fence.Token(i)
			if err := s.Put(ctx, "shared", tok.String(), tok); err != nil && !errors.Is(err, fence.ErrStale) {
				t.Errorf("Put(%d) = %v", i, err)
			}
		})
	}
	wg.Wait()
	for _, c := range nodes {
		v, tok, ok, err := fence.NewStore(c.Node).Get(ctx, "shared")
		if err != nil || !ok || tok != n || v != fence.Token(n).String() {
			t.Fatalf("%s: Get = %q@%d ok %v err %v; want %d@%d", c.Name, v, tok, ok, err, n, n)
		}
	}
}
