package redisproc_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/internal/redisproc"
)

func TestStartArgsOverrideDefaults(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no"},
		{[]string{"--dir", t.TempDir(), "--appendonly", "yes"}, "yes"},
	} {
		addr, stop, err := redisproc.Start(tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(&redis.Options{Addr: addr})
		got, err := c.ConfigGet(context.Background(), "appendonly").Result()
		c.Close()
		stop()
		if err != nil {
			t.Fatal(err)
		}
		if got["appendonly"] != tc.want {
			t.Errorf("Start(%q): appendonly = %q; want %q", tc.args, got["appendonly"], tc.want)
		}
	}
}
