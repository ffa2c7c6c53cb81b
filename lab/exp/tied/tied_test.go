package tied

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/tied"
)

func TestTiedConfigCheck(t *testing.T) {
	s, err := Config{}.check()
	if err != nil {
		t.Fatal(err)
	}
	if s.Servers != Defaults().Servers || s.Workers != Defaults().Workers || s.Reads != Defaults().Reads || s.Rate != Defaults().Rate ||
		s.ReadModel != Defaults().ReadModel.String() || s.Seed != 1 || s.ReadSeed == 0 || s.BackgroundSeed == s.ReadSeed ||
		s.TiedDelayMs != 1 || s.HedgeDelayMs != s.ReadP95Ms || !(s.ReadShare > 0 && s.ReadShare+s.BackgroundShare < 1) || !(s.BackgroundRate > 0) {
		t.Errorf("defaults: %+v", s)
	}
	for _, c := range []Config{
		{Servers: 1}, {Servers: MaxServers + 1}, {Workers: -1}, {Reads: -1}, {Rate: -1}, {BackgroundShare: 1},
		{BackgroundShare: -0.1}, {HedgeDelay: -time.Millisecond}, {HedgeBudget: 2}, {Timeout: -time.Second},
		{Rate: 1000}, // past capacity with the background
	} {
		if _, err := c.check(); !errors.Is(err, exp.ErrConfig) {
			t.Errorf("%+v: %v, want exp.ErrConfig", c, err)
		}
	}
	if _, err := (Config{ReadModel: fixture.Lognormal{P50: 2 * time.Millisecond, P99: time.Millisecond}}).check(); !errors.Is(err, fixture.ErrModel) {
		t.Errorf("bad model: %v", err)
	}
}

// gatedRT holds cancel messages back while held, to make both copies of a
// tie start.
type gatedRT struct {
	base *http.Transport
	mu   sync.Mutex
	ch   chan struct{}
}

func (g *gatedRT) hold() {
	g.mu.Lock()
	g.ch = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedRT) release() {
	g.mu.Lock()
	close(g.ch)
	g.ch = nil
	g.mu.Unlock()
}

func (g *gatedRT) RoundTrip(req *http.Request) (*http.Response, error) {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return g.base.RoundTrip(req)
}

// Every copy that reaches a server is counted once, by what became of it;
// dropped, refused and abandoned copies are not work, copies that both ran
// are.
func TestTiedClusterAccountsEveryCopyOnce(t *testing.T) {
	cfg, _, err := Config{Servers: 2, Workers: 1, QueueLimit: 1, Reads: 4, Rate: 1,
		ReadModel: fixture.Constant(200 * time.Millisecond), BackgroundModel: fixture.Constant(time.Millisecond)}.withDefaults().setup()
	if err != nil {
		t.Fatal(err)
	}
	gate := &gatedRT{base: &http.Transport{}}
	defer gate.base.CloseIdleConnections()
	cl, err := startCluster(cfg, gate)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	s0, s1 := cl.servers[0], cl.servers[1]
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	type answer struct {
		code    int
		dropped string
		err     error
	}
	get := func(ctx context.Context, server int, path, tie string) answer {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cl.urls[server]+path, nil)
		if tie != "" {
			req.Header.Set(tiedwire.TieHeader, tie)
			req.Header.Set(tiedwire.PeerHeader, cl.urls[1-server])
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return answer{err: err}
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return answer{code: resp.StatusCode, dropped: resp.Header.Get(tiedwire.DroppedHeader)}
	}
	async := func(ctx context.Context, server int, path, tie string) chan answer {
		ch := make(chan answer, 1)
		go func() { ch <- get(ctx, server, path, tie) }()
		return ch
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %+v / %+v", what, s0.Stats(), s1.Stats())
			}
		}
	}
	bg := context.Background()
	want := func(what string, got answer, code int, dropped string) {
		t.Helper()
		if got.err != nil || got.code != code || got.dropped != dropped {
			t.Errorf("%s: %+v, want status %d dropped %q", what, got, code, dropped)
		}
	}

	// Server 0 busy (x); y queues and its client leaves (abandoned); z
	// finds the queue full (refused); a queues, and its twin b starts on
	// server 1 and has it dropped.
	x := async(bg, 0, "/item?id=0", "")
	waitFor("x running", func() bool { return s0.Stats().Running == 1 })
	yctx, ycancel := context.WithTimeout(bg, 40*time.Millisecond)
	y := async(yctx, 0, "/item?id=0", "")
	waitFor("y queued", func() bool { return s0.Stats().Queued == 1 })
	want("z", get(bg, 0, "/item?id=0", ""), http.StatusServiceUnavailable, "")
	if a := <-y; a.err == nil {
		t.Errorf("y: %+v, want its client to give up", a)
	}
	ycancel()
	waitFor("y abandoned", func() bool { st := s0.Stats(); return st.Abandoned == 1 && st.Queued == 0 })
	tie1 := tiedwire.NewTie()
	a := async(bg, 0, "/item?id=1", tie1)
	waitFor("a queued", func() bool { return s0.Stats().Queued == 1 })
	want("b", get(bg, 1, "/item?id=1", tie1), http.StatusOK, "")
	want("a", <-a, http.StatusServiceUnavailable, tiedwire.DroppedQueued)
	want("x", <-x, http.StatusOK, "")

	// Both copies of tie 2 start before either cancel is delivered.
	gate.hold()
	d0, d1 := s0.Stats().Dequeued, s1.Stats().Dequeued
	tie2 := tiedwire.NewTie()
	e, f := async(bg, 0, "/item?id=2", tie2), async(bg, 1, "/item?id=2", tie2)
	waitFor("both copies running", func() bool { return s0.Stats().Dequeued == d0+1 && s1.Stats().Dequeued == d1+1 })
	gate.release()
	want("e", <-e, http.StatusOK, "")
	want("f", <-f, http.StatusOK, "")

	// Tie 3's cancel reaches server 0 before its copy does.
	r0 := s0.Stats().CancelsReceived
	tie3 := tiedwire.NewTie()
	g := async(bg, 1, "/item?id=3", tie3)
	waitFor("g's cancel", func() bool { return s0.Stats().CancelsReceived == r0+1 })
	want("h", get(bg, 0, "/item?id=3", tie3), http.StatusServiceUnavailable, tiedwire.DroppedOnArrival)
	want("g", <-g, http.StatusOK, "")
	want("background", get(bg, 1, backgroundPath+"?id=0", ""), http.StatusOK, "")

	if err := cl.settle(bg); err != nil {
		t.Fatal(err)
	}
	cl.shutdown()
	w := serverWork{Reads: 4}
	var b bgWork
	cl.account(&w, &b)
	wantCopies := copyFates{Arrived: 9, Executed: 5, DroppedByTwin: 1, DroppedOnArrival: 1, Refused: 1, Abandoned: 1}
	if w.Copies != wantCopies || !w.Reconciled {
		t.Errorf("copies %+v, want %+v; mismatches %v", w.Copies, wantCopies, w.Mismatches)
	}
	if w.ExtraExecutions != 1 || w.ReadsRunTwice != 1 || w.ReadsNotRun != 0 || w.BothExecuted != 2 || w.CancelsSent != 4 || w.CancelsFailed != 0 {
		t.Errorf("work %+v: want 1 extra execution (tie 2), both executed counted by both servers, 4 cancels sent", w)
	}
	if b.Copies != (copyFates{Arrived: 1, Executed: 1}) {
		t.Errorf("background %+v", b.Copies)
	}
	// A miscount shows as a mismatch.
	cl.fronts[0].read.executed.Add(1)
	w = serverWork{Reads: 4}
	if cl.account(&w, &b); w.Reconciled || len(w.Mismatches) == 0 {
		t.Errorf("an extra execution went unnoticed: %+v", w)
	}
}

// A tiny run has the structure of the report: both clusters under the
// three policies, every copy accounted for, the paper's rows where it has
// them, and a page that shows them. No timing is asserted: loopback is
// too noisy for that.
func TestRunTiedTiny(t *testing.T) {
	cfg := Config{Servers: 2, Workers: 1, Reads: 20, Rate: 400, ReadModel: fixture.Lognormal{P50: 2 * time.Millisecond, P99: 6 * time.Millisecond},
		BackgroundModel: fixture.Constant(5 * time.Millisecond), BackgroundShare: 0.3, Warmup: 30 * time.Millisecond, Seed: 7}
	var progress []int
	cfg.Progress = func(done, total int) {
		if total != 6 {
			t.Errorf("progress total %d", total)
		}
		progress = append(progress, done)
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 6 || len(progress) != 6 || progress[5] != 6 {
		t.Fatalf("%d runs, progress %v", len(rep.Runs), progress)
	}
	if rep.Experiment != "tied" || rep.Config.Seed != 7 || rep.Config.ReadSeed == 0 || rep.Environment.Seed != 7 ||
		rep.Environment.GoVersion != runtime.Version() || rep.Environment.DurationMs <= 0 || rep.Paper != paperTable2 {
		t.Errorf("report head: %+v %+v %+v", rep.Config, rep.Environment, rep.Paper)
	}
	i := 0
	for _, c := range []string{clusterIdle, clusterLoaded} {
		for _, p := range []string{policyNone, policyHedging, policyTied} {
			r := rep.Runs[i]
			i++
			w := r.Work
			if r.Cluster != c || r.Policy != p {
				t.Fatalf("run %d is %s/%s, want %s/%s", i, r.Cluster, r.Policy, c, p)
			}
			if !w.Reconciled || w.Copies.Arrived != w.Copies.sum() {
				t.Errorf("%s/%s: not reconciled: %v %+v", c, p, w.Mismatches, w.Copies)
			}
			if r.Requests != 20 || w.Reads != 20-r.Dropped {
				t.Errorf("%s/%s: %d requests, %d reads sent, %d dropped", c, p, r.Requests, w.Reads, r.Dropped)
			}
			// Executions are one per read that ran, plus the extra.
			if w.Copies.Executed != int64(w.Reads)-w.ReadsNotRun+w.ExtraExecutions {
				t.Errorf("%s/%s: %d executions, %d reads, %d not run, %d extra", c, p, w.Copies.Executed, w.Reads, w.ReadsNotRun, w.ExtraExecutions)
			}
			if w.Reads > 0 && r.ExtraWorkPct != exp.Round2(100*float64(w.ExtraExecutions)/float64(w.Reads)) {
				t.Errorf("%s/%s: extra work %v%% for %d extra executions", c, p, r.ExtraWorkPct, w.ExtraExecutions)
			}
			switch p {
			case policyNone:
				if w.ExtraExecutions != 0 || w.Copies.Arrived > int64(w.Reads) || r.VsNoHedging != nil || w.ReceiptsMissing == 0 && w.ClientCopies != int64(w.Reads) {
					t.Errorf("%s/%s: one copy per read expected: %+v", c, p, w)
				}
			case policyHedging:
				if w.Copies.DroppedByTwin+w.Copies.DroppedOnArrival != 0 || w.CancelsSent != 0 {
					t.Errorf("%s/%s: hedges are not tied: %+v", c, p, w)
				}
			case policyTied:
				// Nearly every read sends its second copy; each copy that
				// ran sent a cancel.
				if w.Copies.Arrived <= int64(w.Reads) || w.CancelsSent+w.CancelsFailed != uint64(w.Copies.Executed) {
					t.Errorf("%s/%s: %+v", c, p, w)
				}
			}
			if (r.Paper != nil) != (p != policyHedging) || r.Paper != nil && *r.Paper != *paperTable2.row(c, p) {
				t.Errorf("%s/%s: paper row %+v", c, p, r.Paper)
			}
			if bgOK := r.Background != nil && r.Background.Sent > 0 && r.Background.Copies.Arrived == int64(r.Background.Sent) &&
				r.Background.Copies.Arrived == r.Background.Copies.sum(); bgOK != (c == clusterLoaded) {
				t.Errorf("%s/%s: background %+v", c, p, r.Background)
			}
			if len(r.latencies) != r.Succeeded {
				t.Errorf("%s/%s: %d latencies for %d successes", c, p, len(r.latencies), r.Succeeded)
			}
		}
	}

	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config      map[string]any   `json:"config"`
		Environment map[string]any   `json:"environment"`
		Paper       map[string]any   `json:"paper"`
		Runs        []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"readSeed", "backgroundSeed", "readModel", "hedgeDelayMs", "tiedDelayMs", "backgroundRate"} {
		if _, ok := v.Config[k]; !ok {
			t.Errorf("config lacks %q", k)
		}
	}
	for _, k := range []string{"cluster", "policy", "p50Ms", "p90Ms", "p99Ms", "p999Ms", "extraWorkPct", "work"} {
		if _, ok := v.Runs[0][k]; !ok {
			t.Errorf("run lacks %q", k)
		}
	}
	if v.Environment["goVersion"] != runtime.Version() || v.Paper["idleTied"] == nil {
		t.Errorf("environment %v paper %v", v.Environment, v.Paper)
	}

	var page bytes.Buffer
	if err := exp.WriteHTML(&page, "tied", rep.Environment, rep); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	for _, s := range []string{"Table 2", "idle cluster", "loaded cluster", "for comparison only", "this machine", "<svg",
		policyNone, policyHedging, policyTied, "extra work %", "98.0", "108.0", strconv.Itoa(cfg.Reads) + " reads"} {
		if !strings.Contains(html, s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
}

// The tied transport's copies name their twin's server as the servers'
// allow-lists have it, so that no copy is served untied.
func TestTiedClusterPeersMatchTransport(t *testing.T) {
	cfg, _, err := Config{Servers: 3, Workers: 1, Reads: 6, Rate: 1, ReadModel: fixture.Constant(time.Millisecond)}.withDefaults().setup()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := startCluster(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	base := hedge.NewBaseTransport()
	defer base.CloseIdleConnections()
	tt, err := tied.NewTransport(tied.TransportConfig{Base: base, Targets: cl.urls, Accept: exp.AcceptValue})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: tt}
	for i := range 6 {
		if err := exp.Read(context.Background(), client, "http://x/item?id="+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	cl.shutdown()
	for i, s := range cl.servers {
		if st := s.Stats(); st.UnknownPeer != 0 || st.InvalidTie != 0 || st.Tied == 0 {
			t.Errorf("server %d: %+v", i, st)
		}
	}
}

// check fills in cfg's defaults, validates it and returns the setup a run
// of it would have.
func (cfg Config) check() (runSetup, error) {
	_, s, err := cfg.withDefaults().setup()
	return s, err
}
