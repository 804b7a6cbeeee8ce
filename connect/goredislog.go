package connect

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// SetGoRedisLog replaces go-redis's logger, which prints to stderr, with
// one that writes each of its lines to l as an Info record whose message
// is the line, with the attribute source=go-redis; with a nil l, the lines
// are dropped. go-redis has one logger for the whole process, not one per
// client: this changes it for every go-redis client of the program, dlock's
// and others', and for good. That is the program's choice to make, so
// the library never makes it (the dlock command, a program, does): call
// SetGoRedisLog from main, once, before opening clients. It is the way to quiet the lines go-redis prints of its own
// about a Sentinel group (which master it selected, and each change), which
// no option of one client reaches; see docs/observability.md.
func SetGoRedisLog(l *slog.Logger) {
	redis.SetLogger(goRedisLog{l})
}

type goRedisLog struct{ l *slog.Logger }

func (g goRedisLog) Printf(ctx context.Context, format string, args ...any) {
	if g.l == nil || !g.l.Enabled(ctx, slog.LevelInfo) {
		return
	}
	g.l.LogAttrs(ctx, slog.LevelInfo, fmt.Sprintf(format, args...), slog.String("source", "go-redis"))
}
