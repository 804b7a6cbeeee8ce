package dlocktest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/option"
)

// reportJob stands for a user's own code, what dlocktest is for: a job
// every instance of a service starts on its schedule, which must run on
// one of them at a time. It knows nothing of dlocktest.
type reportJob struct {
	locker dlock.Locker
	Work   func(ctx context.Context, token fence.Token) error
}

func newReportJob(l dlock.Locker) *reportJob {
	return &reportJob{locker: l, Work: func(context.Context, fence.Token) error { return nil }}
}

// Run runs the job, unless another instance runs it now; it says whether
// it ran.
func (j *reportJob) Run(ctx context.Context) (ran bool, err error) {
	l, err := j.locker.TryAcquire(ctx, "nightly-report", option.AutoRenew(true))
	if errors.Is(err, dlock.ErrTaken) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = j.Work(l.Context(ctx), l.Token())
	return true, errors.Join(err, l.Release(context.WithoutCancel(ctx)))
}

// TestReportRunsOnce is the test the package doc shows: two instances of
// the job share the test's Locker, and the second skips while the first
// runs.
func TestReportRunsOnce(t *testing.T) {
	forEach(t, 0, func(t *testing.T, opts ...dlocktest.Option) {
		ctx := t.Context()
		locker := dlocktest.New(t, opts...)
		a, b := newReportJob(locker), newReportJob(locker)

		started, finish := make(chan struct{}), make(chan struct{})
		var first fence.Token
		a.Work = func(ctx context.Context, token fence.Token) error {
			first = token
			close(started)
			<-finish
			return nil
		}
		done := make(chan error)
		go func() { _, err := a.Run(ctx); done <- err }()
		<-started

		ran, err := b.Run(ctx) // while a runs
		require.NoError(t, err)
		require.False(t, ran, "b ran while a held the lock")
		close(finish)
		require.NoError(t, <-done)

		var second fence.Token
		b.Work = func(_ context.Context, token fence.Token) error { second = token; return nil }
		ran, err = b.Run(ctx)
		require.NoError(t, err)
		require.True(t, ran, "b skipped once a was done")
		require.Greater(t, second, first, "the later run's token")
	})
}
