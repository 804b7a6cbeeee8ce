package otelmetric_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/internal/testkit/examplemain"
)

// The observers start no goroutines, but the leases they watch do
// (renewal); none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(examplemain.With(m, 1)) }
