package single_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

func TestInspect(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range redistest.Nodes(t, srv.Addr()) {
		t.Run(c.Name, func(t *testing.T) {
			ctx := t.Context()
			lk, err := single.New(c.Node)
			require.NoError(t, err)
			key := "inspect-" + c.Name

			info, err := lk.Inspect(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if info.Held || info.Token != 0 || info.Owner != "" {
				t.Errorf("never locked: got %+v; want not held, token 0", info)
			}

			l, err := lk.TryAcquire(ctx, key, option.TTL(5*time.Second))
			require.NoError(t, err)
			info, err = lk.Inspect(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !info.Held || info.Owner != l.Owner() || info.Token != l.Token() {
				t.Errorf("held: got %+v; want owner %s token %v", info, l.Owner(), l.Token())
			}
			if info.TTL <= 4*time.Second || info.TTL > 5*time.Second {
				t.Errorf("held: TTL = %v; want in (4s, 5s]", info.TTL)
			}

			require.NoError(t, l.Release(ctx))
			info, err = lk.Inspect(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if info.Held || info.Owner != "" || info.TTL != 0 || info.Token != l.Token() {
				t.Errorf("released: got %+v; want not held, last token %v", info, l.Token())
			}

			if _, err := lk.Inspect(ctx, ""); !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("empty key: err = %v; want ErrInvalid", err)
			}
		})
	}
}
