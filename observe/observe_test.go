package observe_test

import (
	"fmt"
	"testing"

	"github.com/dlockgo/dlock/observe"
)

// recorder is an Observer that notes its name for each Event it hears.
type recorder struct {
	name string
	got  *[]string
}

func (r recorder) Observe(observe.Event) { *r.got = append(*r.got, r.name) }

func TestMulti(t *testing.T) {
	if o := observe.Multi(); o != nil {
		t.Errorf("Multi() = %v; want nil", o)
	}
	if o := observe.Multi(nil, observe.Multi(nil)); o != nil {
		t.Errorf("Multi(nil, Multi(nil)) = %v; want nil", o)
	}
	var got []string
	a := recorder{"a", &got}
	if o := observe.Multi(nil, a); o != a {
		t.Errorf("Multi(nil, a) = %v; want a itself", o)
	}
	observe.Multi(a, nil, observe.Multi(recorder{"b", &got}, recorder{"c", &got})).Observe(observe.Event{})
	if want := "[a b c]"; fmt.Sprint(got) != want {
		t.Errorf("Multi(a, nil, Multi(b, c)) called %v; want %s", got, want)
	}
}
