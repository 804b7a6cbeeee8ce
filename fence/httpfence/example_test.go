package httpfence_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/fence/httpfence"
)

// A service whose reports are written under a lease: each PUT carries its
// lease's token, and a stale one is answered 409 with the token that won.
// The tokens would come from Lease.Token; here they are written out: the
// holder of 41 stalled, its lease ran out, and the lock went to the
// holder of 42.
func ExampleMiddleware() {
	var guard fence.Guard // or httpfence.Store(fence.NewStore(n)), or the service's own check
	reports := map[string]string{}
	fenced := &httpfence.Middleware{Admit: httpfence.Guard(&guard)} // a resource per path
	mux := http.NewServeMux()
	mux.Handle("PUT /reports/{id}", fenced.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reports[r.PathValue("id")] = string(b) // under the resource's lock
		w.WriteHeader(http.StatusNoContent)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, w := range []struct {
		token fence.Token
		body  string
	}{{42, "final"}, {41, "late draft"}} {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/reports/7", strings.NewReader(w.body))
		req.Header.Set(httpfence.Header, w.token.String())
		resp, err := srv.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("%d: %s, Fencing-Token %q\n", w.token, resp.Status, resp.Header.Get(httpfence.Header))
	}
	fmt.Println(reports["7"])
	// Output:
	// 42: 204 No Content, Fencing-Token ""
	// 41: 409 Conflict, Fencing-Token "42"
	// final
}

// A client working under a lease sends its token with every request, and
// reads a 409 as the end of its lease.
func ExampleTransport() {
	var guard fence.Guard
	fenced := &httpfence.Middleware{Admit: httpfence.Guard(&guard)}
	srv := httptest.NewServer(fenced.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()

	send := func(token fence.Token) error { // token: Lease.Token(), or dlock.Do's
		client := &http.Client{Transport: &httpfence.Transport{Token: token, Base: srv.Client().Transport}}
		resp, err := client.Post(srv.URL+"/jobs/nightly", "text/plain", strings.NewReader("done"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return httpfence.Refused(resp) // fence.ErrStale when the lease was superseded
	}

	fmt.Println(send(42))
	err := send(41)
	fmt.Println(errors.Is(err, fence.ErrStale), err)
	// Output:
	// <nil>
	// true dlock: stale fencing token for "/jobs/nightly": got 41, resource has seen 42
}
