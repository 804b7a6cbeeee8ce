package redistest

import "go.uber.org/goleak"

// ClientGoroutines returns goleak options that leave out the client
// libraries' own goroutines that outlive their client's Close by design,
// each ending by itself: a TestMain whose tests use a valkey-go or rueidis
// cluster client passes them to goleak.VerifyTestMain. Those clients
// close the connections a topology refresh or a redirect replaced five
// seconds later, and start a refresh after a random delay of up to a
// second (singleflight's DelayDo), from goroutines their Close does not
// wait for; goleak's retries last about half a second.
func ClientGoroutines() []goleak.Option {
	var opts []goleak.Option
	for _, lib := range []string{"github.com/valkey-io/valkey-go", "github.com/redis/rueidis"} {
		opts = append(opts,
			goleak.IgnoreAnyFunction(lib+".(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction(lib+".(*clusterClient).redirectOrNew.func1"),
			goleak.IgnoreAnyFunction(lib+".(*call).DelayDo.func1"))
	}
	return opts
}
