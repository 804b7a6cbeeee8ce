package observe

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/lease"
)

// Log returns an Observer that writes one record per Event to logger (nil
// means slog.Default()). Every record has the attribute strategy, and key
// but for a master's change; votes and a master's change add node; all
// but AcquireStarted and a master's change add outcome; acquisitions,
// votes and rate limit calls add wait; an Event with an error adds err.
// Levels:
//
//   - Debug: acquire started, a vote, an acquisition that found the lock
//     taken or whose context ended, a renewal that succeeded, a rate
//     limit's call that was allowed or refused or whose context ended
//     (RateDecided: one per request).
//   - Info: acquired, released (only a Release that ended a live lease
//     is reported: one of a lease already lost or expired writes nothing,
//     its end was logged then).
//   - Warn: a renewal that failed, a lease lost or expired, a release that
//     failed, a change of the master followed through Sentinels
//     (MasterChanged: a failover), an operator's break
//     (ForceReleased), whether it succeeded or failed.
//   - Error: an acquisition or a rate limit's call that failed for any
//     other reason (servers down, no quorum, too slow, an invalid
//     argument).
//
// Outcomes are those of the metrics: Outcome for acquisitions, the
// Event's Outcome for votes and rate limit calls (RateOutcome), "ok"
// or "failed" for renewals, releases and breaks, "expired" or "lost" for
// losses.
//
// Events carry no owner values or tokens, and the err text is cleaned of
// any that an error might quote: a run of 16 or more hexadecimal digits
// outside the key (an owner value, a fencing token, a server clock) is cut
// to its first 4 followed by "…", and a stale-token error keeps its
// resource but not its tokens.
func Log(logger *slog.Logger) Observer {
	if logger == nil {
		logger = slog.Default()
	}
	return logObserver{logger}
}

type logObserver struct{ l *slog.Logger }

func (o logObserver) Observe(e Event) {
	level, msg, outcome := describe(e)
	ctx := context.Background()
	if !o.l.Enabled(ctx, level) {
		return
	}
	var buf [7]slog.Attr
	attrs := buf[:0]
	if e.Key != "" {
		attrs = append(attrs, slog.String("key", e.Key))
	}
	attrs = append(attrs, slog.String("strategy", e.Strategy))
	if e.Node != "" {
		attrs = append(attrs, slog.String("node", e.Node))
	}
	if outcome != "" {
		attrs = append(attrs, slog.String("outcome", outcome))
	}
	if e.Kind == AcquireEnded || e.Kind == Vote || e.Kind == RateDecided {
		attrs = append(attrs, slog.Duration("wait", e.Wait))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", redact(e.Err, e.Key)))
	}
	o.l.LogAttrs(ctx, level, msg, attrs...)
}

// describe returns the level, message and outcome of e's record.
func describe(e Event) (slog.Level, string, string) {
	switch e.Kind {
	case AcquireStarted:
		return slog.LevelDebug, "dlock acquire started", ""
	case AcquireEnded:
		switch out := Outcome(e.Err); out {
		case "acquired":
			return slog.LevelInfo, "dlock acquired", out
		case "taken", "canceled":
			// The caller asked for it (TryAcquire, a deadline): no fault.
			return slog.LevelDebug, "dlock not acquired", out
		default:
			return slog.LevelError, "dlock acquire failed", out
		}
	case Vote:
		return slog.LevelDebug, "dlock vote", e.Outcome
	case Renewed:
		if e.Err == nil {
			return slog.LevelDebug, "dlock renewed", "ok"
		}
		return slog.LevelWarn, "dlock renewal failed", "failed"
	case Lost:
		return slog.LevelWarn, "dlock lease lost", lostCause(e.Err)
	case Released:
		if e.Err == nil {
			return slog.LevelInfo, "dlock released", "ok"
		}
		return slog.LevelWarn, "dlock release failed", "failed"
	case MasterChanged:
		return slog.LevelWarn, "dlock master changed", ""
	case ForceReleased:
		if e.Err == nil {
			return slog.LevelWarn, "dlock force released", "ok"
		}
		return slog.LevelWarn, "dlock force release failed", "failed"
	case RateDecided:
		// A limit's everyday answers, one per request, are debug only.
		// Constant messages: this runs before the level check.
		switch e.Outcome {
		case "allowed":
			return slog.LevelDebug, "dlock rate allowed", e.Outcome
		case "refused":
			return slog.LevelDebug, "dlock rate refused", e.Outcome
		case "canceled":
			return slog.LevelDebug, "dlock rate canceled", e.Outcome
		default:
			return slog.LevelError, "dlock rate limit failed", e.Outcome
		}
	}
	return slog.LevelDebug, "dlock event", e.Kind.String()
}

// lostCause names the cause of a Lost event: "expired" when the lease's
// validity ran out by the local clock, else "lost" (a renewal was refused).
func lostCause(err error) string {
	if errors.Is(err, lease.ErrExpired) {
		return "expired"
	}
	return "lost"
}

// minSecret is the shortest run of hex digits redact cuts: owner values are
// 32, tokens and server clocks in µs 16; ports and durations are shorter.
const minSecret = 16

// redact returns err's text with the tokens of a *fence.StaleError taken
// out and every run of minSecret or more hex digits outside key cut short.
func redact(err error, key string) string {
	s := err.Error()
	var se *fence.StaleError
	if errors.As(err, &se) {
		s = strings.ReplaceAll(s, se.Error(), "dlock: stale fencing token for "+strconv.Quote(se.Resource))
	}
	if key == "" || !strings.Contains(s, key) {
		return cutHex(s)
	}
	parts := strings.Split(s, key)
	for i, p := range parts {
		parts[i] = cutHex(p)
	}
	return strings.Join(parts, key)
}

func cutHex(s string) string {
	var b strings.Builder
	last, run := 0, 0 // s[:last] is in b; run is the hex run ending at i
	for i := 0; i <= len(s); i++ {
		if i < len(s) && isHex(s[i]) {
			run++
			continue
		}
		if run >= minSecret {
			b.WriteString(s[last : i-run+4])
			b.WriteString("…")
			last = i
		}
		run = 0
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
