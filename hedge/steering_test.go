package hedge

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/internal/memnet"
)

// replicaStub is an in-memory replica whose latency a test may change
// while it serves, and which counts reads and shadows apart.
type replicaStub struct {
	latNs   atomic.Int64
	reads   atomic.Int32 // primaries and hedges
	shadows atomic.Int32 // requests marked ShadowHeader
}

func newReplicaStub(lat time.Duration) *replicaStub {
	r := &replicaStub{}
	r.latNs.Store(int64(lat))
	return r
}

func (r *replicaStub) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Header.Get(ShadowHeader) != "" {
		r.shadows.Add(1)
	} else {
		r.reads.Add(1)
	}
	if memnet.Sleep(req.Context(), time.Duration(r.latNs.Load())) {
		io.WriteString(w, "ok")
	}
}

// read sends one GET through c and returns how long it took.
func read(t *testing.T, c *http.Client) time.Duration {
	t.Helper()
	start := time.Now()
	resp, err := c.Get("http://replicas/item")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(start)
}

// The README's NewClient over two replicas, the first 300ms slow: the
// primaries go by latency, not in the order the targets are listed, so
// nearly every read is fast once the first slow answer has priced the
// slow replica (before, the primary always went to Targets[0], and once the
// budget ran out 18 of 30 reads took 301ms).
func TestNewClientAvoidsSlowFirstTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow, fast := newReplicaStub(300*time.Millisecond), newReplicaStub(time.Millisecond)
		net := &memnet.Transport{}
		net.Handle("slow", slow)
		net.Handle("fast", fast)
		c, err := NewClient(TransportConfig{Base: net, Targets: []string{"http://slow", "http://fast"}})
		if err != nil {
			t.Fatal(err)
		}
		quick := 0
		for range 30 {
			if read(t, c) < 100*time.Millisecond {
				quick++
			}
		}
		net.Wait()
		if quick < 28 {
			t.Errorf("%d of 30 reads fast, want at least 28 (slow replica: %d reads, fast: %d)", quick, slow.reads.Load(), fast.reads.Load())
		}
	})
}

// A Transport built from Targets puts a replica whose latency stays well
// above its peers' on probation: it gets no primaries, a shadow copy of a
// read now and then measures it, and once those show it recovered it
// serves again. Ten readers at once keep the fast replicas busy enough
// that choosing by latency and load alone still sends the slow one reads.
func TestTransportProbationByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := newReplicaStub(4*time.Millisecond), newReplicaStub(4*time.Millisecond), newReplicaStub(20*time.Millisecond)
		net := &memnet.Transport{}
		net.Handle("a", a)
		net.Handle("b", b)
		net.Handle("c", c)
		tr, err := NewTransport(TransportConfig{Base: net, Targets: []string{"http://a", "http://b", "http://c"},
			Policy: Policy{Delay: time.Second}}) // no hedges: primaries only
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: tr}
		// drive has 10 readers read back to back for d.
		drive := func(d time.Duration) {
			end := time.Now().Add(d)
			var wg sync.WaitGroup
			for range 10 {
				wg.Go(func() {
					for time.Now().Before(end) {
						read(t, client)
					}
				})
			}
			wg.Wait()
			net.Wait()
		}
		drive(10 * time.Second)
		if n := tr.Replicas().OnProbation(); n != 1 {
			t.Fatalf("%d replicas on probation after 10s of c at 5x its peers, want 1; c: %d reads; %+v", n, c.reads.Load(), *tr.Replicas().Snapshot(time.Now())[2].Probation)
		}
		// On probation: no reads, shadows at about one a second.
		readsBefore, shadowsBefore := c.reads.Load(), c.shadows.Load()
		drive(5 * time.Second)
		if n := c.reads.Load() - readsBefore; n != 0 {
			t.Errorf("c on probation got %d reads", n)
		}
		if n := c.shadows.Load() - shadowsBefore; n < 4 || n > 6 {
			t.Errorf("c on probation got %d shadows in 5s, want about 5 (one a second)", n)
		}
		if a.shadows.Load()+b.shadows.Load() != 0 {
			t.Errorf("shadows to replicas not on probation: a %d, b %d", a.shadows.Load(), b.shadows.Load())
		}
		// Recovered: the shadows bring it back, and it serves reads again.
		c.latNs.Store(int64(4 * time.Millisecond))
		drive(20 * time.Second)
		if n := tr.Replicas().OnProbation(); n != 0 {
			t.Fatalf("%d replicas on probation 20s after c recovered: %+v", n, *tr.Replicas().Snapshot(time.Now())[2].Probation)
		}
		readsBefore = c.reads.Load()
		drive(2 * time.Second)
		if c.reads.Load() == readsBefore {
			t.Error("c, recovered, gets no reads")
		}
	})
}
