package probation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/replica"
)

func TestProbationConfigDefaults(t *testing.T) {
	s, err := Config{}.check()
	if err != nil {
		t.Fatal(err)
	}
	if s.DurationMs != 60000 || s.DegradeFromMs != 12000 || s.DegradeToMs != 30000 || s.Factor != 10 || s.Replicas != 3 ||
		s.DegradedReplica != "replica-c" || s.DegradedIndex != 2 || s.Rate != Defaults().Rate || s.Seed != 1 {
		t.Errorf("defaults: %+v", s)
	}
	if s.DegradedModel != "phase:from=12s,to=30s,factor=10,base="+Defaults().Model.String() {
		t.Errorf("degraded model %s", s.DegradedModel)
	}
	// The probation settings are the gateway's, defaults filled in.
	want := settings{Factor: 3, ExitFactor: 2, WindowMs: 5000, MinSamples: 5, MaxShare: 0.1, MaxOnProbation: 1, ShadowRate: 1}
	if s.Probation != want || s.HedgeDelay != "adaptive p90" || s.MaxAttempts != 2 || s.TimeoutMs != 10000 {
		t.Errorf("gateway settings: %+v, %s, %d, %v", s.Probation, s.HedgeDelay, s.MaxAttempts, s.TimeoutMs)
	}
	// The number of reads is the arrivals of the seed within the run.
	if want := load.PoissonArrivals(load.Config{Rate: s.Rate, Seed: s.ArrivalSeed}, time.Minute); s.Reads != want || math.Abs(float64(s.Reads)-24000) > 600 {
		t.Errorf("reads %d, want %d (about 24000)", s.Reads, want)
	}
	// Given settings are kept, and the defaults of the degradation scale
	// with the duration.
	s, err = Config{Duration: 10 * time.Second, Replicas: 5, Factor: 4, Seed: 9,
		Gateway: gateway.Config{Replica: replica.Config{Probation: replica.Probation{Window: time.Second, ShadowRate: 4}}}}.check()
	if err != nil {
		t.Fatal(err)
	}
	if s.DegradeFromMs != 2000 || s.DegradeToMs != 5000 || s.DegradedReplica != "replica-e" || s.Probation.WindowMs != 1000 || s.Probation.ShadowRate != 4 ||
		len(s.FixtureSeeds) != 5 || s.FixtureSeeds[0] == s.FixtureSeeds[1] {
		t.Errorf("%+v", s)
	}
	// A degradation from the start is allowed.
	if _, err := (Config{Duration: 2 * time.Second, DegradeTo: time.Second}).check(); err != nil {
		t.Error(err)
	}
}

func TestProbationConfigRejects(t *testing.T) {
	for _, c := range []Config{
		{Duration: 50 * time.Millisecond},
		{Duration: time.Hour},
		{Rate: -1},
		{Rate: 5000},
		{Rate: 2000, Duration: 5 * time.Minute},
		{Replicas: 1},
		{Replicas: 11},
		{DegradeFrom: 30 * time.Second, DegradeTo: 10 * time.Second},
		{DegradeFrom: 10 * time.Second, DegradeTo: 10 * time.Second},
		{DegradeTo: 2 * time.Minute},
		{DegradeFrom: -time.Second, DegradeTo: time.Second},
		{Factor: 1},
		{Factor: 1001},
		{Factor: math.NaN()},
	} {
		if _, err := c.check(); !errors.Is(err, exp.ErrConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if _, err := (Config{Model: fixture.Constant(-1)}).check(); !errors.Is(err, fixture.ErrModel) {
		t.Errorf("bad model: %v", err)
	}
	bad := Config{Gateway: gateway.Config{Replica: replica.Config{Probation: replica.Probation{Window: -time.Second}}}}
	if _, err := bad.check(); !errors.Is(err, exp.ErrConfig) || !strings.Contains(err.Error(), "probation-window") {
		t.Errorf("bad probation window: %v", err)
	}
	bad = Config{Gateway: gateway.Config{Replica: replica.Config{Probation: replica.Probation{MinSamples: -1}}}}
	if _, err := bad.check(); !errors.Is(err, gateway.ErrInvalid) && !errors.Is(err, replica.ErrInvalid) {
		t.Errorf("bad gateway config: %v", err)
	}
	if _, err := Run(context.Background(), Config{Replicas: 1}); !errors.Is(err, exp.ErrConfig) {
		t.Errorf("Run: %v", err)
	}
}

func state(status replica.ProbationStatus, since time.Time) replica.State {
	return replica.State{Name: "http://127.0.0.1:1", Probation: &replica.ProbationState{Status: status, Since: since, Reason: status.String()}}
}

// The poller dates moves on and off probation, and the start of a
// divergence, by the replica set's own times, never before the replica's
// previous move nor after the poll; other moves by the poll.
func TestProbationPollerTransitions(t *testing.T) {
	start := time.Now()
	at := func(ms float64) time.Time { return start.Add(time.Duration(ms * float64(time.Millisecond))) }
	p := &poller{names: []string{"replica-a", "replica-b"}, start: start}
	serving := state(replica.Serving, time.Time{})
	p.observe([]replica.State{serving, serving}, at(100))
	p.observe([]replica.State{serving, state(replica.Diverging, at(150))}, at(200))
	p.observe([]replica.State{serving, state(replica.OnProbation, at(5150))}, at(5200))
	p.observe([]replica.State{serving, state(replica.OnProbation, at(5150))}, at(5300)) // no change
	p.observe([]replica.State{serving, state(replica.Recovering, at(5150))}, at(9000))  // since is the entry: dated by the poll
	p.observe([]replica.State{serving, state(replica.OnProbation, at(5150))}, at(9100)) // back: by the poll too
	p.observe([]replica.State{serving, state(replica.Recovering, at(5150))}, at(9200))
	p.observe([]replica.State{serving, state(replica.Serving, at(14150))}, at(14200))
	p.observe([]replica.State{serving, state(replica.Diverging, at(99999))}, at(15000)) // a date past the poll is the poll's
	p.observe([]replica.State{{Name: "off"}, state(replica.Serving, time.Time{})}, at(16000))
	type tr struct {
		at       float64
		from, to replica.ProbationStatus
	}
	want := []tr{
		{150, replica.Serving, replica.Diverging},
		{5150, replica.Diverging, replica.OnProbation},
		{9000, replica.OnProbation, replica.Recovering},
		{9100, replica.Recovering, replica.OnProbation},
		{9200, replica.OnProbation, replica.Recovering},
		{14150, replica.Recovering, replica.Serving},
		{15000, replica.Serving, replica.Diverging},
		{16000, replica.Diverging, replica.Serving},
	}
	if len(p.transitions) != len(want) {
		t.Fatalf("transitions %+v", p.transitions)
	}
	for i, w := range want {
		g := p.transitions[i]
		if math.Abs(g.AtMs-w.at) > 0.01 || g.From != w.from || g.To != w.to || g.Replica != "replica-b" || g.index != 1 || g.Reason != w.to.String() {
			t.Errorf("transition %d: %+v, want %+v", i, g, w)
		}
	}
	b, err := json.Marshal(p.transitions[1])
	if err != nil || string(b) != `{"atMs":5150,"replica":"replica-b","from":"diverging","to":"probation","reason":"probation"}` {
		t.Errorf("JSON %s %v", b, err)
	}
}

// The timeline: one entry per second, reads by scheduled time, arrivals
// by replica and kind, statuses and time on probation from the
// transitions, and what the run adds up from them.
func TestProbationTimeline(t *testing.T) {
	ms := time.Millisecond
	outs := []load.Outcome{
		{Scheduled: 100 * ms, Latency: 5 * ms},
		{Scheduled: 900 * ms, Latency: 7 * ms},
		{Scheduled: 1100 * ms, Latency: 30 * ms},
		{Scheduled: 1500 * ms, Err: errors.New("boom")}, // the second's p99 is a failure: null
		{Scheduled: 2500 * ms, Latency: 4 * ms},
		// none in the fourth second
	}
	arrivals := []arrivalAt{
		{100, 0, kindPrimary}, {900, 1, kindPrimary}, {1100, 2, kindPrimary}, {1150, 0, kindHedge},
		{1500, 2, kindPrimary}, {2100, 2, kindShadow}, {2500, 0, kindPrimary}, {3900, 2, kindShadow},
		{4200, 2, kindShadow}, // after the run: counted in its last second
	}
	tr := []transition{
		{AtMs: 1200, From: replica.Serving, To: replica.Diverging, index: 2},
		{AtMs: 1800, From: replica.Diverging, To: replica.OnProbation, index: 2},
		{AtMs: 2600, From: replica.OnProbation, To: replica.Recovering, index: 2},
		{AtMs: 3250, From: replica.Recovering, To: replica.Serving, index: 2},
	}
	tl := timeline{seconds: 4, names: []string{"a", "b", "c"}, degraded: 2, from: 1000, to: 2000, probation: true, transitions: tr}
	secs := tl.build(outs, arrivals)
	if len(secs) != 4 {
		t.Fatalf("%d seconds", len(secs))
	}
	type want struct {
		reads, failed          int
		p99                    float64 // -1: null
		degraded, onProbation  bool
		status                 string
		onMs                   float64
		attempts, shadows, p0s int
	}
	for i, w := range []want{
		{2, 0, 7, false, false, "serving", 0, 0, 0, 1},
		{2, 1, -1, true, true, "probation", 200, 2, 0, 0},
		{1, 0, 4, false, true, "recovering", 1000, 0, 1, 1},
		{0, 0, -1, false, true, "serving", 250, 0, 2, 0},
	} {
		s := secs[i]
		p99 := -1.0
		if s.P99Ms != nil {
			p99 = *s.P99Ms
		}
		if s.Second != i || s.Reads != w.reads || s.Failed != w.failed || p99 != w.p99 || s.Degraded != w.degraded || s.OnProbation != w.onProbation ||
			s.Replicas[2].Status != w.status || s.Replicas[2].OnProbationMs != w.onMs || s.DegradedAttempts != w.attempts || s.DegradedShadows != w.shadows ||
			s.Replicas[0].Primaries != w.p0s || s.Replicas[0].Name != "a" {
			t.Errorf("second %d: %+v (c: %+v), want %+v", i, s, s.Replicas[2], w)
		}
		// The status at the end of each second is the one the transitions
		// say, and a second on probation has a status on probation or had a
		// move off it.
		if got := tl.status(2, float64(i+1)*1000).String(); got != s.Replicas[2].Status {
			t.Errorf("second %d: status %s, transitions say %s", i, s.Replicas[2].Status, got)
		}
	}
	if secs[1].Replicas[0].Hedges != 1 || secs[1].P50Ms == nil || *secs[1].P50Ms != 30 {
		t.Errorf("second 1: %+v", secs[1])
	}
	// Without probation there is no status.
	off := tl
	off.probation = false
	if s := off.build(outs, arrivals); s[1].Replicas[2].Status != "" || s[1].OnProbation || s[1].Replicas[2].OnProbationMs != 0 {
		t.Errorf("without probation: %+v", s[1])
	}

	run := Result{Probation: true, Primaries: 5, Hedges: 1, Shadows: 3, Transitions: tr}
	run.DuringDegradation = load.Summarize(outs[2:4], time.Second)
	states := []replica.State{{}, {}, {Probation: &replica.ProbationState{Entries: 1, Exits: 1}}}
	run.finish(tl, arrivals, states)
	if run.EnteredAtMs == nil || *run.EnteredAtMs != 1800 || *run.TimeToEnterMs != 800 || run.ExitedAtMs == nil || *run.ExitedAtMs != 3250 || *run.TimeToExitMs != 1250 {
		t.Errorf("enter/exit: %v %v %v %v", run.EnteredAtMs, run.TimeToEnterMs, run.ExitedAtMs, run.TimeToExitMs)
	}
	if run.OnProbationMs != 1450 || run.DegradedShadows != 3 || run.DegradedAttemptsDuring != 2 || run.Unreconciled != 0 || run.UnreconciledShadows != 0 ||
		run.Received[2].Entries != 1 || run.OtherEntries != 0 || run.ExtraAttemptsPctDuring != 50 {
		t.Errorf("run: %+v", run)
	}
	// Before the degradation c took none of 2 primaries; during it, 2 of 2.
	if run.PrimarySharePctBefore != 0 || run.DegradedPrimarySharePct != 100 {
		t.Errorf("shares: %v %v", run.PrimarySharePctBefore, run.DegradedPrimarySharePct)
	}
	// A stay that has not ended is closed at the end of the timeline.
	open := timeline{seconds: 3, transitions: tr[:2]}
	if iv := open.onProbation(2); len(iv) != 1 || iv[0] != [2]float64{1800, 3000} {
		t.Errorf("open stay: %v", iv)
	}
}

// A short real run: both runs, one timeline entry per second or part of
// one, the probation state of the run with it, transitions consistent with
// the statuses, attempts reconciled with the gateway's counts, and the
// HTML page with its timeline.
func TestRunProbationShort(t *testing.T) {
	if testing.Short() {
		t.Skip("real loopback run")
	}
	var calls, last, total int
	rep, err := Run(context.Background(), Config{
		Duration: 1100 * time.Millisecond, Rate: 150, Model: fixture.Constant(2 * time.Millisecond),
		DegradeFrom: 200 * time.Millisecond, DegradeTo: 700 * time.Millisecond, Factor: 20, Seed: 3,
		Gateway:  gateway.Config{Replica: replica.Config{Probation: replica.Probation{Window: 100 * time.Millisecond, MinSamples: 3, ShadowRate: 50}}},
		Progress: func(done, n int) { calls, last, total = calls+1, done, n },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].Condition != withoutProbation || rep.Runs[1].Condition != withProbation || rep.Runs[0].Probation || !rep.Runs[1].Probation {
		t.Fatalf("runs %+v", rep.Runs)
	}
	if calls == 0 || last != total || total != 4 {
		t.Errorf("progress: %d calls, last %d/%d", calls, last, total)
	}
	for _, run := range rep.Runs {
		if len(run.Seconds) != 2 || run.Requests != rep.Config.Reads || run.Succeeded+run.Failed+run.Dropped != run.Requests {
			t.Errorf("%s: %d seconds, %d reads of %d", run.Condition, len(run.Seconds), run.Requests, rep.Config.Reads)
		}
		reads, attempts, shadows := 0, 0, 0
		for i, s := range run.Seconds {
			reads += s.Reads
			if s.Second != i || len(s.Replicas) != 3 || s.Replicas[2].Name != "replica-c" || (s.Replicas[2].Status != "") != run.Probation {
				t.Errorf("%s second %d: %+v", run.Condition, i, s)
			}
			for _, r := range s.Replicas {
				attempts += r.Primaries + r.Hedges
				shadows += r.Shadows
			}
		}
		if reads != run.Requests || int64(attempts)+run.Unreconciled != run.Primaries+run.Hedges || int64(shadows)+run.UnreconciledShadows != run.Shadows {
			t.Errorf("%s: %d reads, %d attempts (%d unreconciled), %d shadows: %+v", run.Condition, reads, attempts, run.Unreconciled, shadows, run)
		}
		// Only a hedge's loser cancelled on its way may not arrive.
		switch {
		case run.Unreconciled < 0:
			t.Errorf("%s: replicas received %d attempts more than the gateway sent", run.Condition, -run.Unreconciled)
		case run.Unreconciled > run.Hedges:
			t.Errorf("%s: %d attempts sent never arrived, more than the %d hedges (primaries %d, failed reads %d, dropped %d)",
				run.Condition, run.Unreconciled, run.Hedges, run.Primaries, run.Failed, run.Dropped)
		}
		if !run.Probation && (len(run.Transitions) != 0 || run.Shadows != 0 || run.EnteredAtMs != nil) {
			t.Errorf("without probation: %+v", run)
		}
		if math.Abs(run.DegradedFromMs-200) > 100 || math.Abs(run.DegradedToMs-run.DegradedFromMs-500) > 0.01 {
			t.Errorf("%s: degradation [%v, %v)", run.Condition, run.DegradedFromMs, run.DegradedToMs)
		}
		// Each transition starts where the previous one of its replica
		// ended, in time order, and the statuses follow them.
		prev := map[string]replica.ProbationStatus{}
		prevAt := map[string]float64{}
		for _, tr := range run.Transitions {
			if tr.From != prev[tr.Replica] || tr.AtMs < prevAt[tr.Replica] || tr.From == tr.To {
				t.Errorf("%s: transition %+v after %v at %v", run.Condition, tr, prev[tr.Replica], prevAt[tr.Replica])
			}
			prev[tr.Replica], prevAt[tr.Replica] = tr.To, tr.AtMs
		}
		if run.EnteredAtMs != nil && (run.TimeToEnterMs == nil || *run.EnteredAtMs < 0) {
			t.Errorf("%s: entered %v", run.Condition, *run.EnteredAtMs)
		}
	}
	on := rep.Runs[1]
	if len(on.Received) != 3 || on.Received[2].Shadows != on.DegradedShadows {
		t.Errorf("received %+v", on.Received)
	}
	var html bytes.Buffer
	if err := exp.WriteHTML(&html, "probation", rep.Environment, rep); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"p99 per second", "<svg", "replica-c degraded", "no probation", "Cost and probation", "What replica-c received per second"} {
		if !strings.Contains(html.String(), s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil || !bytes.Contains(b, []byte(`"seconds":[`)) || !bytes.Contains(b, []byte(`"degradedModel":"phase:from=200ms,to=700ms,factor=20,base=const:2ms"`)) {
		t.Errorf("JSON: %v %.300s", err, b)
	}
}

// The HTML section of a report with a stay on probation marks it, and one
// whose probation never came says so.
func TestProbationSection(t *testing.T) {
	p99 := func(x float64) *float64 { return &x }
	secs := func(on bool) []Second {
		var s []Second
		for i := range 6 {
			sec := Second{Second: i, Reads: 10, P50Ms: p99(2), P99Ms: p99(float64(5 + 10*i)), DegradedAttempts: 3}
			if i == 3 {
				sec.P99Ms, sec.p99 = nil, math.Inf(1)
			}
			if on {
				sec.DegradedShadows = 1
			}
			s = append(s, sec)
		}
		return s
	}
	rep := &Report{Config: runSetup{Replicas: 3, DegradedReplica: "replica-c", DegradedIndex: 2, DurationMs: 6000, Factor: 10, Model: "const:1ms",
		DegradeFromMs: 1000, DegradeToMs: 3000, Probation: settings{Factor: 3, ExitFactor: 2, WindowMs: 5000, ShadowRate: 1}}}
	off := Result{Condition: withoutProbation, Summary: load.Summarize(nil, 0), Seconds: secs(false), DegradedFromMs: 1000, DegradedToMs: 3000,
		Received: []replicaWork{{Name: "replica-a"}, {Name: "replica-b"}, {Name: "replica-c"}}}
	on := off
	on.Condition, on.Probation, on.Seconds = withProbation, true, secs(true)
	on.Transitions = []transition{{AtMs: 2000, Replica: "replica-c", From: replica.Serving, To: replica.OnProbation, Reason: "slow <b>"},
		{AtMs: 4500, Replica: "replica-c", From: replica.OnProbation, To: replica.Serving}}
	on.EnteredAtMs, on.TimeToEnterMs, on.ExitedAtMs, on.TimeToExitMs = p99(2000), p99(1000), p99(4500), p99(1500)
	rep.Runs = []Result{off, on}
	sec := rep.Section()
	if len(sec.Plots) != 2 || !sec.Plots[0].LogY || len(sec.Tables) != 3 {
		t.Fatalf("section %+v", sec)
	}
	names := map[string]int{}
	for _, s := range sec.Plots[0].Series {
		names[s.Name] = len(s.Points)
	}
	if names[withoutProbation] != 5 || names[withProbation] != 5 || names["replica-c degraded"] != 2 || names["replica-c on probation"] != 2 {
		t.Errorf("timeline series %v", names)
	}
	for _, s := range sec.Plots[0].Series {
		if s.Name == "replica-c on probation" && (s.Points[0].X != 2 || s.Points[1].X != 4.5) {
			t.Errorf("probation bar %+v", s.Points)
		}
	}
	if !strings.Contains(sec.Plots[0].Caption, "In 2 seconds") || !strings.Contains(sec.Text, "came off 1.5 s after it ended") {
		t.Errorf("caption %q, text %q", sec.Plots[0].Caption, sec.Text)
	}
	var html bytes.Buffer
	if err := exp.WriteHTML(&html, "probation", exp.Environment{}, rep); err != nil {
		t.Fatal(err)
	}
	if h := html.String(); !strings.Contains(h, "slow &lt;b&gt;") || !strings.Contains(h, "2.0 s (+1.0 s)") || strings.Contains(h, "<b>") {
		t.Errorf("HTML table")
	}
	// Never on probation: no bar, and the text says why it may not be.
	on.Transitions, on.EnteredAtMs, on.ExitedAtMs, on.TimeToEnterMs, on.TimeToExitMs = nil, nil, nil, nil, nil
	rep.Runs[1] = on
	sec = rep.Section()
	for _, s := range sec.Plots[0].Series {
		if strings.Contains(s.Name, "on probation") {
			t.Errorf("bar without probation: %+v", s)
		}
	}
	if !strings.Contains(sec.Text, "never went on probation") || len(sec.Tables) != 2 {
		t.Errorf("text %q", sec.Text)
	}
}

// check fills in cfg's defaults, validates it and returns the setup a run
// of it would have.
func (cfg Config) check() (runSetup, error) { return cfg.withDefaults().setup() }
