package tied_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/memnet"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/tied"
)

// app is the handler behind a tied Server in the tests: it records the
// paths it runs, in order, and answers "<name> <path>" after lat; the path
// "/block" holds its worker until release is closed.
type app struct {
	name    string
	lat     time.Duration
	release chan struct{}

	mu      sync.Mutex
	ran     []string
	headers []http.Header
}

func newApp(name string) *app { return &app{name: name, release: make(chan struct{})} }

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.ran = append(a.ran, r.URL.Path)
	a.headers = append(a.headers, r.Header.Clone())
	a.mu.Unlock()
	if r.URL.Path == "/block" {
		<-a.release
	} else if a.lat > 0 {
		time.Sleep(a.lat)
	}
	io.WriteString(w, a.name+" "+r.URL.Path)
}

func (a *app) paths() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ran...)
}

// cluster is a set of tied Servers on an in-memory network, host "a" at
// http://a and so on, each listing all the others as peers.
type cluster struct {
	t    *testing.T
	net  *memnet.Transport
	srv  map[string]*tied.Server
	apps map[string]*app
}

// newCluster builds servers for names; cfg (may be nil) adjusts each one's
// config. Servers are closed and handlers waited for at cleanup.
func newCluster(t *testing.T, cfg func(name string, c *tied.ServerConfig), names ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, net: new(memnet.Transport), srv: map[string]*tied.Server{}, apps: map[string]*app{}}
	for _, n := range names {
		sc := tied.ServerConfig{Workers: 1, CancelTransport: c.net}
		for _, p := range names {
			if p != n {
				sc.Peers = append(sc.Peers, "http://"+p)
			}
		}
		if cfg != nil {
			cfg(n, &sc)
		}
		s, err := tied.NewServer(sc)
		if err != nil {
			t.Fatal(err)
		}
		a := newApp(n)
		c.srv[n], c.apps[n] = s, a
		c.net.Handle(n, s.Handler(a))
	}
	return c
}

// close releases every blocked handler, closes the servers and waits for
// the network's handlers.
func (c *cluster) close() {
	for _, a := range c.apps {
		select {
		case <-a.release:
		default:
			close(a.release)
		}
	}
	for _, s := range c.srv {
		s.Close()
	}
	c.net.Wait()
}

// get sends one GET to url with extra headers (pairs of name, value) and
// returns the response with its body read.
func (c *cluster) get(ctx context.Context, url string, hdr ...string) (*http.Response, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.net.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// answer is what a request started in the background got.
type answer struct {
	resp *http.Response
	body string
	err  error
}

// start sends a GET in the background.
func (c *cluster) start(ctx context.Context, url string, hdr ...string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		resp, body, err := c.get(ctx, url, hdr...)
		ch <- answer{resp, body, err}
	}()
	return ch
}

// cancelMsg posts a cancel for tie to the server at host, as a peer would.
func (c *cluster) cancelMsg(host, query string, hdr ...string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+host+tied.DefaultCancelPath+"?"+query, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.net.RoundTrip(req)
	if err != nil {
		c.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func tieHeaders(tie, peer string) []string {
	return []string{tiedwire.TieHeader, tie, tiedwire.PeerHeader, peer}
}

func hedgeMark() []string { return []string{hedge.HedgeHeader, "1"} }

// statsEqual fails the test if the counters named in want differ.
func checkStats(t *testing.T, name string, got tied.Stats, want tied.Stats) {
	t.Helper()
	if got != want {
		t.Errorf("%s stats:\n got %+v\nwant %+v", name, got, want)
	}
}
