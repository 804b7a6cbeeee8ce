// Package httpfence carries fencing tokens over HTTP: a client sends the
// token of the lease it holds in a Fencing-Token request header
// (Transport), and a service admits each request's token for the resource
// it writes before handling it (Middleware), answering a stale one with
// 409 Conflict and the highest token the resource has seen.
//
// The header is to a lease what If-Match is to an ETag: a precondition.
// A client treats a 409 as the end of its lease (Refused reads it): it
// stops, and does not retry with the same token.
//
// # What it protects
//
// Middleware admits a token and runs the handler as one step for its
// resource, in this process: it holds a lock of the resource's from the
// admission until the handler returns, so the handler's writes are
// ordered as their tokens were admitted. A service of several instances
// writing one store gets no such order from it: fence that store's
// writes themselves (fence/sqlfence, fence.Store) and pass the token on.
// Requests for which Middleware.Resource names no resource (reads, say)
// are not fenced, and a reader ignoring the token reads whatever was
// written last.
package httpfence

import (
	"context"
	"errors"
	"hash/maphash"
	"net/http"
	"strconv"
	"sync"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/argerr"
)

// Header is the request header that carries a token, in decimal; a
// response to a stale one carries the highest token in it.
const Header = "Fencing-Token"

// Admitter admits token t for resource, or refuses it with an error
// matching fence.ErrStale (a *fence.StaleError, whose Highest Middleware
// sends back). Admit must record t so that a later, smaller token is
// refused.
type Admitter interface {
	Admit(ctx context.Context, resource string, t fence.Token) error
}

// AdmitFunc is an Admitter written as a function: the user's own check.
type AdmitFunc func(ctx context.Context, resource string, t fence.Token) error

// Admit calls f.
func (f AdmitFunc) Admit(ctx context.Context, resource string, t fence.Token) error {
	return f(ctx, resource, t)
}

// Guard admits with g, in this process's memory (fence.Guard.Admit).
func Guard(g *fence.Guard) Admitter {
	return AdmitFunc(func(_ context.Context, resource string, t fence.Token) error {
		return g.Admit(resource, t)
	})
}

// Store admits with s: the register named after the resource holds the
// highest token admitted (fence.Store.Put of the token under itself), so
// that the fence outlives the process. Keep the resource's data under
// other keys.
func Store(s *fence.Store) Admitter {
	return AdmitFunc(func(ctx context.Context, resource string, t fence.Token) error {
		return s.Put(ctx, resource, t.String(), t)
	})
}

// Middleware admits requests by their Fencing-Token. Admit is required.
type Middleware struct {
	// Admit checks a request's token for its resource.
	Admit Admitter
	// Resource names the resource r writes; "" leaves r unfenced. Nil
	// means r.URL.Path for every request.
	Resource func(r *http.Request) string
}

// Wrap returns a handler that calls next for a request whose token
// Admit admits for its resource, with the resource's lock held until
// next returns. It answers, without calling next:
//
//   - 428 Precondition Required when the request has no Fencing-Token;
//   - 400 Bad Request when it is not a decimal number;
//   - 409 Conflict when Admit refuses it as stale: the Fencing-Token
//     header and the body's last line give the highest token;
//   - 400 when Admit refuses it as invalid (lease.ErrInvalid), and 503
//     Service Unavailable when Admit fails otherwise.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resource := r.URL.Path
		if m.Resource != nil {
			resource = m.Resource(r)
		}
		if resource == "" {
			next.ServeHTTP(w, r)
			return
		}
		v := r.Header.Get(Header)
		if v == "" {
			http.Error(w, "httpfence: a "+Header+" header is required", http.StatusPreconditionRequired)
			return
		}
		t, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			http.Error(w, "httpfence: "+Header+" must be a decimal token", http.StatusBadRequest)
			return
		}
		mu := m.lock(resource)
		mu.Lock()
		defer mu.Unlock()
		err = m.Admit.Admit(r.Context(), resource, fence.Token(t))
		var se *fence.StaleError
		switch {
		case errors.As(err, &se):
			w.Header().Set(Header, se.Highest.String())
			http.Error(w, "httpfence: stale fencing token; the resource has seen\n"+se.Highest.String(), http.StatusConflict)
		case errors.Is(err, argerr.ErrInvalid):
			http.Error(w, "httpfence: "+err.Error(), http.StatusBadRequest)
		case err != nil:
			http.Error(w, "httpfence: the fence did not answer", http.StatusServiceUnavailable)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// locks are the resources' locks, shared by every Middleware: a resource
// takes the one its name hashes to, and two resources that share one are
// ordered together, which costs waiting and never safety.
var locks struct {
	seed    maphash.Seed
	once    sync.Once
	stripes [64]sync.Mutex
}

func (m *Middleware) lock(resource string) *sync.Mutex {
	locks.once.Do(func() { locks.seed = maphash.MakeSeed() })
	return &locks.stripes[maphash.String(locks.seed, resource)%uint64(len(locks.stripes))]
}

// Transport is an http.RoundTripper that sends Token in the Fencing-Token
// header of every request, on a copy of the request: a client whose
// requests are made under one lease (Lease.Token, or the token dlock.Do
// passes). A zero Token, a lease without one, is refused with a
// *lease.ArgError and nothing is sent.
type Transport struct {
	Token fence.Token
	// Base makes the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
}

// RoundTrip sends r with the token.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.Token == 0 {
		if r.Body != nil {
			r.Body.Close() // a RoundTripper closes the body, even on an error
		}
		return nil, &argerr.Error{Arg: "Token", Value: t.Token, Rule: "must not be zero: a lease without a token cannot be fenced"}
	}
	c := r.Clone(r.Context())
	c.Header.Set(Header, t.Token.String())
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(c)
}

// Client returns a client whose requests carry token (a Transport on
// http.DefaultTransport).
func Client(token fence.Token) *http.Client {
	return &http.Client{Transport: &Transport{Token: token}}
}

// Refused returns a *fence.StaleError, which matches fence.ErrStale, when
// resp answers a request's token as stale (409 with a Fencing-Token
// header), and nil for any other response. Its Resource is the request's
// path, its Token the request's.
func Refused(resp *http.Response) error {
	if resp.StatusCode != http.StatusConflict {
		return nil
	}
	h, err := strconv.ParseUint(resp.Header.Get(Header), 10, 64)
	if err != nil {
		return nil
	}
	se := &fence.StaleError{Highest: fence.Token(h)}
	if r := resp.Request; r != nil {
		se.Resource = r.URL.Path
		t, _ := strconv.ParseUint(r.Header.Get(Header), 10, 64)
		se.Token = fence.Token(t)
	}
	return se
}
