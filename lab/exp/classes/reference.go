package classes

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// reference is the experiment's yardstick, written apart from Tailgate's
// engine: a proxy over two replicas that hedges each path after that
// path's running p90 (p(1 − 10% budget), as Finagle's backup requests
// pick it) to the other replica, within a budget of 10% extra attempts
// (burst 10), primaries alternating. The first 200 wins; the loser is
// cancelled, its elapsed time kept as a lower bound of its latency.
type reference struct {
	backends [2]string
	client   *http.Client
	next     atomic.Uint64

	mu      sync.Mutex
	lat     map[string]*ring
	credits float64
}

const (
	refFraction   = 0.1
	refBurst      = 10
	refWarmup     = 10 * time.Millisecond // until refMinSamples latencies
	refMinSamples = 50
	refWindow     = 1000 // latencies per path
)

// ring is a path's last refWindow latencies.
type ring struct {
	v    []time.Duration
	next int
}

func (r *ring) add(d time.Duration) {
	if len(r.v) < refWindow {
		r.v = append(r.v, d)
		return
	}
	r.v[r.next] = d
	r.next = (r.next + 1) % refWindow
}

func (r *ring) p90() time.Duration {
	if len(r.v) < refMinSamples {
		return refWarmup
	}
	s := slices.Clone(r.v)
	slices.Sort(s)
	return s[len(s)*9/10]
}

func newReference(a, b string, client *http.Client) *reference {
	return &reference{backends: [2]string{a, b}, client: client, lat: map[string]*ring{}, credits: refBurst}
}

// delay returns path's hedge delay, and earns the read's credit.
func (p *reference) delay(path string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.credits = min(p.credits+refFraction, refBurst)
	r := p.lat[path]
	if r == nil {
		r = &ring{}
		p.lat[path] = r
	}
	return r.p90()
}

func (p *reference) spend() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.credits < 1 {
		return false
	}
	p.credits--
	return true
}

func (p *reference) record(path string, d time.Duration) {
	p.mu.Lock()
	p.lat[path].add(d)
	p.mu.Unlock()
}

type answer struct {
	body  []byte
	err   error
	start time.Time
}

func (p *reference) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	delay := p.delay(path)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	answers := make(chan answer, 2)
	send := func(i int) time.Time {
		start := time.Now()
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.backends[i]+r.URL.RequestURI(), nil)
			resp, err := p.client.Do(req)
			var body []byte
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusOK {
					err = io.ErrUnexpectedEOF
				}
			}
			answers <- answer{body, err, start}
		}()
		return start
	}
	primary := int(p.next.Add(1) % 2)
	starts := []time.Time{send(primary)}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for pending := 1; pending > 0; {
		select {
		case <-timer.C:
			if len(starts) == 1 && p.spend() {
				starts = append(starts, send(1-primary))
				pending++
			}
		case a := <-answers:
			pending--
			if a.err != nil {
				continue
			}
			now := time.Now()
			p.record(path, now.Sub(a.start))
			for _, s := range starts {
				if s != a.start {
					p.record(path, now.Sub(s)) // the loser took at least this long
				}
			}
			w.Write(a.body)
			return
		}
	}
	http.Error(w, "no answer", http.StatusBadGateway)
}
