package httpfence_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/fence/httpfence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service is a resource behind the middleware: the bodies it was sent,
// in the order it took them.
type service struct {
	mu     sync.Mutex
	writes []string
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.writes = append(s.writes, r.Header.Get(httpfence.Header)+":"+string(b))
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *service) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.writes) == 0 {
		return ""
	}
	return s.writes[len(s.writes)-1]
}

// start serves svc behind a Middleware admitting with a, for the test.
func start(t *testing.T, a httpfence.Admitter, svc *service) *httptest.Server {
	m := &httpfence.Middleware{Admit: a, Resource: func(r *http.Request) string {
		if r.Method == http.MethodGet {
			return "" // reads are not fenced
		}
		return r.URL.Path
	}}
	srv := httptest.NewServer(m.Wrap(svc))
	t.Cleanup(srv.Close)
	return srv
}

// put sends body to path with the header set to token ("" for none).
func put(t *testing.T, srv *httptest.Server, path, token, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set(httpfence.Header, token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestMiddleware(t *testing.T) {
	var g fence.Guard
	svc := &service{}
	srv := start(t, httpfence.Guard(&g), svc)
	for _, c := range []struct {
		token, body string
		code        int
		highest     string // the Fencing-Token of the answer
	}{
		{"", "none", http.StatusPreconditionRequired, ""},
		{"x1", "bad", http.StatusBadRequest, ""},
		{"33", "a", http.StatusNoContent, ""},
		{"34", "b", http.StatusNoContent, ""},
		{"33", "late", http.StatusConflict, "34"},
		{"34", "b again", http.StatusNoContent, ""},
		{"0", "zero", http.StatusConflict, "34"},
	} {
		resp := put(t, srv, "/reports/1", c.token, c.body)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.code || resp.Header.Get(httpfence.Header) != c.highest {
			t.Errorf("token %q: %d, Fencing-Token %q; want %d, %q", c.token, resp.StatusCode, resp.Header.Get(httpfence.Header), c.code, c.highest)
		}
		if c.highest != "" {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if lines[len(lines)-1] != c.highest {
				t.Errorf("token %q: body %q; want its last line %s", c.token, b, c.highest)
			}
		}
	}
	if got := svc.last(); got != "34:b again" {
		t.Errorf("last write %q; want 34:b again", got)
	}
	if g.Highest("/reports/2") != 0 {
		t.Error("another resource's fence moved")
	}
	resp, err := srv.Client().Get(srv.URL + "/reports/1")
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("an unfenced read without a token: %v, %v; want 204", resp, err)
	}
	resp.Body.Close()
}

// Requests with interleaved tokens from several clients at once: the
// handler sees their tokens in an order that never goes down.
func TestMiddlewareConcurrent(t *testing.T) {
	var g fence.Guard
	svc := &service{}
	srv := start(t, httpfence.Guard(&g), svc)
	const clients, each = 4, 25
	var wg sync.WaitGroup
	refused := make([]int, clients)
	for c := range clients {
		wg.Go(func() {
			tr := &httpfence.Transport{Base: srv.Client().Transport}
			for i := range each {
				tr.Token = fence.Token(i*clients + c + 1)
				resp, err := (&http.Client{Transport: tr}).Post(srv.URL+"/r", "text/plain", strings.NewReader("x"))
				if err != nil {
					t.Error(err)
					return
				}
				if err := httpfence.Refused(resp); err != nil {
					refused[c]++
					var se *fence.StaleError
					if !errors.As(err, &se) || se.Highest <= tr.Token || se.Token != tr.Token {
						t.Errorf("refusal of %d: %#v", tr.Token, err)
					}
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	svc.mu.Lock()
	defer svc.mu.Unlock()
	var last uint64
	for _, w := range svc.writes {
		var tok uint64
		for _, ch := range strings.TrimSuffix(w, ":x") {
			tok = tok*10 + uint64(ch-'0')
		}
		if tok < last {
			t.Fatalf("token %d handled after %d: %v", tok, last, svc.writes)
		}
		last = tok
	}
	n := 0
	for _, r := range refused {
		n += r
	}
	if len(svc.writes)+n != clients*each {
		t.Errorf("%d handled and %d refused of %d", len(svc.writes), n, clients*each)
	}
	t.Logf("%d handled, %d refused", len(svc.writes), n)
}

func TestTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Header.Get(httpfence.Header)))
	}))
	defer srv.Close()
	c := httpfence.Client(42)
	defer c.CloseIdleConnections()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "42" {
		t.Errorf("the server got Fencing-Token %q; want 42", b)
	}
	if err := httpfence.Refused(resp); err != nil {
		t.Errorf("Refused(200) = %v", err)
	}
	_, err = (&http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}).Get(srv.URL)
	if !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("the zero token: %v; want lease.ErrInvalid", err)
	}
}

// A holder paused past its lease sends its request late: the next holder,
// granted on a real server, has written since, and the late request is
// refused with the next holder's token, by a Guard and by a Store.
func TestPausedHolder(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "go-redis", srv.Addr())
	lk, err := single.New(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	var g fence.Guard
	for name, a := range map[string]httpfence.Admitter{
		"guard": httpfence.Guard(&g),
		"store": httpfence.Store(fence.NewStore(n)),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			svc := &service{}
			api := start(t, a, svc)
			client := func(tok fence.Token) *http.Client {
				return &http.Client{Transport: &httpfence.Transport{Token: tok, Base: api.Client().Transport}}
			}
			old, err := lk.Acquire(ctx, "report:"+name, option.TTL(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			paused := client(old.Token())
			send := func(c *http.Client, body string) *http.Response {
				resp, err := c.Post(api.URL+"/report", "text/plain", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp
			}
			if resp := send(paused, "draft"); resp.StatusCode != http.StatusNoContent {
				t.Fatalf("the holder's request: %d", resp.StatusCode)
			}
			<-old.Done() // the pause: the lease runs out, and the next holder waits for the server's
			wait, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			cur, err := lk.Acquire(wait, "report:"+name)
			if err != nil {
				t.Fatalf("the next holder: %v", err)
			}
			defer cur.Release(ctx)
			if resp := send(client(cur.Token()), "final"); resp.StatusCode != http.StatusNoContent {
				t.Fatalf("the next holder's request: %d", resp.StatusCode)
			}
			resp := send(paused, "late draft")
			err = httpfence.Refused(resp)
			var se *fence.StaleError
			if !errors.Is(err, fence.ErrStale) || !errors.As(err, &se) || se.Highest != cur.Token() || se.Token != old.Token() {
				t.Fatalf("the late request: %d, %v; want 409 naming %d", resp.StatusCode, err, cur.Token())
			}
			if got, want := svc.last(), cur.Token().String()+":final"; got != want {
				t.Errorf("last write %q; want %q", got, want)
			}
		})
	}
}

// The user's own check: its stale refusal is a 409 as a Guard's, an
// invalid token a 400, any other failure a 503; the handler runs for none.
func TestAdmitFunc(t *testing.T) {
	svc := &service{}
	var fail error
	srv := start(t, httpfence.AdmitFunc(func(_ context.Context, resource string, tok fence.Token) error {
		return fail
	}), svc)
	for _, c := range []struct {
		err  error
		code int
	}{
		{nil, http.StatusNoContent},
		{&fence.StaleError{Resource: "/r", Token: 7, Highest: 9}, http.StatusConflict},
		{&lease.ArgError{Arg: "t", Value: 7, Rule: "too large"}, http.StatusBadRequest},
		{errors.New("the store is down"), http.StatusServiceUnavailable},
	} {
		fail = c.err
		if resp := put(t, srv, "/r", "7", "x"); resp.StatusCode != c.code {
			t.Errorf("Admit returning %v: %d; want %d", c.err, resp.StatusCode, c.code)
		}
	}
	if len(svc.writes) != 1 {
		t.Errorf("the handler ran %d times; want once", len(svc.writes))
	}
}
