package rueidis_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/internal/testkit/examplemain"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(examplemain.With(m, 1)) }
