package gateway

import (
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
)

// metrics holds the gateway's Prometheus series in a registry of its own.
// The hot path only increments pre-resolved children; gauges of state
// (breakers, delay, in-flight) are read at scrape time.
type metrics struct {
	registry *prometheus.Registry

	requests    *prometheus.CounterVec
	byCode      map[int]prometheus.Counter // pre-resolved common codes
	latency     prometheus.Histogram
	attempts    *prometheus.CounterVec
	primaries   prometheus.Counter
	hedges      prometheus.Counter
	hedgeWins   prometheus.Counter
	suppressed  map[hedge.SuppressReason]prometheus.Counter
	rejections  *prometheus.CounterVec
	rejected    map[string]prometheus.Counter
	failures    map[string]prometheus.Counter // attempt failures, by reason
	late        prometheus.Counter
	cancelsSeen prometheus.Counter
	shadows     map[string]prometheus.Counter // by outcome
	gateMoves   map[bool]prometheus.Counter   // by whether the gate shut (false: reopened)
	gateMu      sync.Mutex                    // orders the gate's changes, which arrive from any goroutine
	gateSeen    uint64                        // the Changes of the last one reported
	gateShut    bool                          // as last reported, to tell moves from changes of signal
	gateShutAt  time.Time                     // when it last shut, as reported
	log         *slog.Logger

	replicaAttempts replicaAttempts // by replica, role and outcome (see replicametrics.go)
	budgetFraction  prometheus.Gauge
	budgetBurst     prometheus.Gauge

	// Tied mode only: nil otherwise.
	tiedCopies   []prometheus.Counter          // by copy: first, second
	tiedDropped  map[string]prometheus.Counter // by when: queued, arrival
	tiedRequests map[string]prometheus.Counter // by outcome
}

func newMetrics(g *Gateway) *metrics {
	m := &metrics{registry: prometheus.NewRegistry(), log: g.log}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_requests_total",
		Help: "Client requests answered, by HTTP status code (code 0: the client left first).",
	}, []string{"code"})
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tailgate_request_duration_seconds",
		Help:    "Time from receiving a client request to its answer, hedges included.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10},
	})
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_attempts_total",
		Help: "Backend attempts started, by role: primary or hedge (in tied mode, a second copy or an attempt after a failure).",
	}, []string{"role"})
	m.hedgeWins = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tailgate_hedge_wins_total",
		Help: "Requests answered by a hedge (in tied mode, the second attempt) rather than the primary.",
	})
	suppressed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_hedges_suppressed_total",
		Help: "Hedges wanted but not sent, by reason: budget, gate, deadline, maxAttempts, noTarget, capacity.",
	}, []string{"reason"})
	m.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_rejections_total",
		Help: "Client requests refused before any backend attempt, by reason: max_requests, max_attempts, method, body, target, deadline (too little time left: 504), bad_deadline (a malformed Tailgate-Timeout: 400).",
	}, []string{"reason"})
	m.late = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tailgate_late_completions_total",
		Help: "Losing attempts whose work completed after the winner (within the observation window).",
	})
	m.cancelsSeen = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tailgate_cancellations_observed_total",
		Help: "Losing attempts seen to stop after being cancelled.",
	})
	shadows := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_shadow_requests_total",
		Help: "Shadow requests to replicas on probation (copies of answered reads, answers discarded), by outcome: success, failure, canceled (timed out or shut down), skipped (due, but no free slot).",
	}, []string{"outcome"})
	m.shadows = byLabel(shadows, shadowOutcomes)
	gateMoves := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_hedge_gate_transitions_total",
		Help: "Times the overload gate shut (to=shut) or reopened (to=open).",
	}, []string{"to"})
	m.gateMoves = map[bool]prometheus.Counter{true: gateMoves.WithLabelValues("shut"), false: gateMoves.WithLabelValues("open")}
	m.byCode = map[int]prometheus.Counter{}
	for _, c := range []int{0, 200, 204, 206, 301, 302, 304, 400, 401, 403, 404, 405, 429, 500, 502, 503, 504} {
		m.byCode[c] = m.requests.WithLabelValues(strconv.Itoa(c))
	}
	m.primaries = m.attempts.WithLabelValues("primary")
	m.hedges = m.attempts.WithLabelValues("hedge")
	m.suppressed = map[hedge.SuppressReason]prometheus.Counter{}
	for _, r := range hedge.SuppressReasons {
		m.suppressed[r] = suppressed.WithLabelValues(r.String())
	}
	m.rejected = byLabel(m.rejections, []string{rejectRequests, rejectAttempts, rejectMethod, rejectBody, rejectTarget, rejectDeadline, rejectBadDeadline})
	m.replicaAttempts = newReplicaAttempts()
	m.registry.MustRegister(m.requests, m.latency, m.attempts, m.hedgeWins, suppressed, m.rejections,
		m.late, m.cancelsSeen, shadows, gateMoves, &stateCollector{g: g}, discoveryCollector{g.discovered}, m.replicaAttempts.vec, buildInfo())
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_attempt_failures_total",
		Help: "Backend attempts that got no acceptable answer, by reason: status (a 5xx), transport (refused, reset, cut short, malformed), tls (a certificate refused, either way; a failed TLS handshake), upgrade (a 101 to a read that asked for none), headers (header block over the limit), body (body over the limit), timeout (the request's time ran out first; neutral for breakers). Losers cancelled for a winner are not counted.",
	}, []string{"reason"})
	m.failures = byLabel(failures, failureReasons)
	m.registry.MustRegister(failures)
	if g.tied {
		m.registerTied()
	}
	if g.aff != nil {
		m.registry.MustRegister(g.aff.keyless, g.aff.fallbacks, partitionCollector{g.aff.table})
	}
	return m
}

// attemptFailed counts an attempt failure by reason ("" counts nothing).
func (m *metrics) attemptFailed(reason string) {
	if reason != "" {
		m.failures[reason].Inc()
	}
}

// registerTied adds the series of tied mode.
func (m *metrics) registerTied() {
	copies := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_tied_copies_total",
		Help: "Tied copies launched (carrying Tailgate-Tie and Tailgate-Tie-Peer), by copy: first (the primary) or second (sent the tied delay later, marked as a hedge). They are also counted in tailgate_attempts_total, as primary and hedge.",
	}, []string{"copy"})
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_tied_dropped_total",
		Help: "Answers to tied copies that their replica dropped unrun because the twin had started elsewhere (503 with Tailgate-Tie-Dropped), by when: queued or arrival. Never winners; neutral for breakers and latency.",
	}, []string{"when"})
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_tied_requests_total",
		Help: "Reads in tied mode, by outcome: first or second (the copy whose answer won), retry (the first copy failed before the second was due; the second went at once, untied, and won), untied (sent alone: no second replica available, or the budget or deadline would not allow a second copy), failed (tied, no acceptable answer).",
	}, []string{"outcome"})
	for _, c := range tiedCopies {
		m.tiedCopies = append(m.tiedCopies, copies.WithLabelValues(c))
	}
	m.tiedDropped = byLabel(dropped, tiedDropped)
	m.tiedRequests = byLabel(requests, tiedOutcomes)
	m.registry.MustRegister(copies, dropped, requests)
}

// byLabel returns vec's counters for each of values, by value, made up
// front so that counting needs no label lookup on the request path.
func byLabel(vec *prometheus.CounterVec, values []string) map[string]prometheus.Counter {
	m := make(map[string]prometheus.Counter, len(values))
	for _, v := range values {
		m[v] = vec.WithLabelValues(v)
	}
	return m
}

func (m *metrics) tiedCopy(i int)             { m.tiedCopies[i].Inc() }
func (m *metrics) tiedRequest(outcome string) { m.tiedRequests[outcome].Inc() }

// tiedDrop counts a dropped answer by its tied.DroppedHeader value.
func (m *metrics) tiedDrop(when string) {
	if when != tied.DroppedOnArrival {
		when = tied.DroppedQueued // the only other value a tied.Server sends
	}
	m.tiedDropped[when].Inc()
}

// TiedCounts is what a gateway in tied mode has counted: copies sent,
// dropped answers received, and reads by outcome (see DebugState).
type TiedCounts struct {
	FirstCopies  int64 `json:"firstCopies"`
	SecondCopies int64 `json:"secondCopies"`
	// DroppedQueued and DroppedOnArrival count answers dropped for their
	// twin, by tied.DroppedHeader.
	DroppedQueued    int64 `json:"droppedQueued"`
	DroppedOnArrival int64 `json:"droppedOnArrival"`
	// Requests counts reads by outcome: first, second, retry, untied,
	// failed.
	Requests map[string]int64 `json:"requests"`
}

// tied reports the tied-mode counts so far; zero when the gateway is not
// in tied mode.
func (m *metrics) tied() TiedCounts {
	if m.tiedCopies == nil {
		return TiedCounts{}
	}
	c := TiedCounts{
		FirstCopies: counterInt(m.tiedCopies[0]), SecondCopies: counterInt(m.tiedCopies[1]),
		DroppedQueued:    counterInt(m.tiedDropped[tied.DroppedQueued]),
		DroppedOnArrival: counterInt(m.tiedDropped[tied.DroppedOnArrival]),
		Requests:         map[string]int64{},
	}
	for _, o := range tiedOutcomes {
		c.Requests[o] = counterInt(m.tiedRequests[o])
	}
	return c
}

func (m *metrics) observeRequest(code int, d time.Duration) {
	c, ok := m.byCode[code]
	if !ok {
		c = m.requests.WithLabelValues(strconv.Itoa(code))
	}
	c.Inc()
	m.latency.Observe(d.Seconds())
}

func (m *metrics) reject(reason string) { m.rejected[reason].Inc() }

func (m *metrics) shadow(outcome string) { m.shadows[outcome].Inc() }

func counterInt(c prometheus.Counter) int64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		return 0
	}
	return int64(d.GetCounter().GetValue())
}

// Wants implements hedge.EventFilter: receipts are not needed for counts.
func (m *metrics) Wants(k hedge.EventKind) bool {
	switch k {
	case hedge.EventLaunch, hedge.EventWin, hedge.EventSuppress, hedge.EventReport, hedge.EventGate:
		return true
	}
	return false
}

// Observe implements hedge.Observer.
func (m *metrics) Observe(e hedge.Event) {
	switch e.Kind {
	case hedge.EventLaunch:
		if e.Attempt.IsHedge() {
			m.hedges.Inc()
		} else {
			m.primaries.Inc()
		}
	case hedge.EventWin:
		if e.Attempt.IsHedge() {
			m.hedgeWins.Inc()
		}
	case hedge.EventSuppress:
		if c, ok := m.suppressed[e.Reason]; ok {
			c.Inc()
		}
	case hedge.EventReport:
		switch e.Fate {
		case hedge.FateLate:
			m.late.Inc()
		case hedge.FateCanceled:
			m.cancelsSeen.Inc()
		}
	case hedge.EventGate:
		m.gateChanged(e.Gate)
	}
}

// gateChanged counts and logs a change of the overload gate: one line when
// it shuts, one when it reopens, one when the evidence keeping it shut
// changes.
func (m *metrics) gateChanged(st *hedge.GateState) {
	m.gateMu.Lock()
	defer m.gateMu.Unlock()
	if st.Changes <= m.gateSeen {
		return // overtaken by a later change, already reported
	}
	m.gateSeen = st.Changes
	shut := !st.Open()
	moved := m.gateShut != shut
	m.gateShut = shut
	if moved {
		m.gateMoves[shut].Inc()
	}
	switch {
	case shut && moved:
		m.gateShutAt = st.Since
		m.log.Warn("overload gate shut: hedges for late answers paused", "signals", st.Shut.String(), "evidence", st.String())
	case shut:
		m.log.Info("overload gate still shut, on new evidence", "signals", st.Shut.String(), "evidence", st.String())
	default:
		// Why it reopened: no signal of overload is left, and the figures
		// each signal is judged on say what changed.
		m.log.Info("overload gate reopened: hedges for late answers resume", "shutFor", st.Since.Sub(m.gateShutAt).Round(time.Millisecond),
			"state", st.String(), "evidence", gateEvidence(st))
	}
}

// stateCollector reports gauges read from the gateway's state at scrape
// time, so the request path never touches them.
type stateCollector struct{ g *Gateway }

var (
	descBreaker = prometheus.NewDesc("tailgate_breaker_state",
		"Circuit breaker state per replica: 0 closed, 1 half-open, 2 open.", []string{"replica"}, nil)
	descEWMA = prometheus.NewDesc("tailgate_replica_latency_ewma_seconds",
		"Peak-EWMA latency per replica, used to choose primaries.", []string{"replica"}, nil)
	descReplicaInFlight = prometheus.NewDesc("tailgate_replica_in_flight",
		"Attempts in flight per replica.", []string{"replica"}, nil)
	descDelay = prometheus.NewDesc("tailgate_hedge_delay_seconds",
		"Hedge delay new requests use now.", nil, nil)
	descCredits = prometheus.NewDesc("tailgate_hedge_budget_credits",
		"Hedges the duplicate-work budget would allow right now.", nil, nil)
	descGate = prometheus.NewDesc("tailgate_hedge_gate_open",
		"1 while the overload gate lets late-answer hedges through, 0 while it pauses them.", nil, nil)
	descGateSignal = prometheus.NewDesc("tailgate_hedge_gate_signal",
		"1 while this signal of overload keeps the gate shut: noHelp (hedges seldom win), slowdown (median latency risen against its baseline), capacity (the request or attempt limit 90% full), unavailable (most replicas' breakers open).", []string{"signal"}, nil)
	descGateHedges = prometheus.NewDesc("tailgate_hedge_gate_window_hedges",
		"Requests in the gate's window that sent a hedge because an answer was late and have ended, by result: won (a hedge answered first) or lost.", []string{"result"}, nil)
	descGateMedian = prometheus.NewDesc("tailgate_hedge_gate_median_seconds",
		"Median latency of accepted attempts the slowdown signal compares: recent (the last 128 of the last 2s) against baseline (the lower quartile of the 1s medians of the last 5 minutes); 0 while unknown.", []string{"window"}, nil)
	descGateProbes = prometheus.NewDesc("tailgate_hedge_gate_probes_total",
		"Hedges sent through a shut gate to learn whether hedges help again: the first 1s after it shut, then every 2, 4, 5s while they lose.", nil, nil)
	descInFlight = prometheus.NewDesc("tailgate_in_flight",
		"Client requests, backend attempts and shadow requests in flight.", []string{"kind"}, nil)
	descProbation = prometheus.NewDesc("tailgate_replica_probation",
		"1 while the replica is on latency probation (no primaries, shadows only), else 0.", []string{"replica"}, nil)
	descTransitions = prometheus.NewDesc("tailgate_probation_transitions_total",
		"Moves of a replica on and off probation, by where it went: probation or serving.", []string{"replica", "to"}, nil)
	descP50 = prometheus.NewDesc("tailgate_replica_latency_p50_seconds",
		"Median latency per replica over its probation window, as last judged (0 while unknown).", []string{"replica"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBreaker, descEWMA, descReplicaInFlight, descDelay, descCredits, descGate,
		descGateSignal, descGateHedges, descGateMedian, descGateProbes, descInFlight, descProbation, descTransitions, descP50} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, s := range c.g.view.Load().set.Snapshot(now) {
		state := 0.0
		switch s.Breaker {
		case replica.HalfOpen:
			state = 1
		case replica.Open:
			state = 2
		}
		ch <- prometheus.MustNewConstMetric(descBreaker, prometheus.GaugeValue, state, s.Name)
		ch <- prometheus.MustNewConstMetric(descEWMA, prometheus.GaugeValue, s.EWMA.Seconds(), s.Name)
		ch <- prometheus.MustNewConstMetric(descReplicaInFlight, prometheus.GaugeValue, float64(s.InFlight), s.Name)
		if p := s.Probation; p != nil {
			on := 0.0
			if p.Status.OnProbation() {
				on = 1
			}
			ch <- prometheus.MustNewConstMetric(descProbation, prometheus.GaugeValue, on, s.Name)
			ch <- prometheus.MustNewConstMetric(descTransitions, prometheus.CounterValue, float64(p.Entries), s.Name, "probation")
			ch <- prometheus.MustNewConstMetric(descTransitions, prometheus.CounterValue, float64(p.Exits), s.Name, "serving")
			ch <- prometheus.MustNewConstMetric(descP50, prometheus.GaugeValue, msSeconds(p.P50Ms), s.Name)
		}
	}
	st := c.g.hedger.Stats() // evaluates the gate if that is due
	gs := st.Gate
	ch <- prometheus.MustNewConstMetric(descDelay, prometheus.GaugeValue, st.Delay.Seconds())
	ch <- prometheus.MustNewConstMetric(descCredits, prometheus.GaugeValue, st.Credits)
	ch <- prometheus.MustNewConstMetric(descGate, prometheus.GaugeValue, b2f(gs.Open()))
	for _, sig := range hedge.AllGateSignals {
		ch <- prometheus.MustNewConstMetric(descGateSignal, prometheus.GaugeValue, b2f(gs.Shut&sig != 0), sig.String())
	}
	ch <- prometheus.MustNewConstMetric(descGateHedges, prometheus.GaugeValue, float64(gs.HedgeWins), "won")
	ch <- prometheus.MustNewConstMetric(descGateHedges, prometheus.GaugeValue, float64(gs.Hedged-gs.HedgeWins), "lost")
	ch <- prometheus.MustNewConstMetric(descGateMedian, prometheus.GaugeValue, gs.RecentMedian.Seconds(), "recent")
	ch <- prometheus.MustNewConstMetric(descGateMedian, prometheus.GaugeValue, gs.BaselineMedian.Seconds(), "baseline")
	ch <- prometheus.MustNewConstMetric(descGateProbes, prometheus.CounterValue, float64(gs.Probes))
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(c.g.requests.inUse()), "requests")
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(c.g.attempts.inUse()), "attempts")
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(c.g.shadows.slots.inUse()), "shadows")
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// observers fans events out to several observers.
type observers []hedge.Observer

func (o observers) Observe(e hedge.Event) {
	for _, x := range o {
		x.Observe(e)
	}
}

// chainObservers returns an observer calling first and then extra, if any.
func chainObservers(first hedge.Observer, extra hedge.Observer) hedge.Observer {
	if extra == nil {
		return first
	}
	return observers{first, extra}
}
