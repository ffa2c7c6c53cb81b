package gateway

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/discovery"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/replica"
)

// metrics holds the gateway's Prometheus series in a registry of its own.
// The hot path only increments pre-resolved children; gauges of state
// (breakers, delay, in-flight) are read at scrape time.
type metrics struct {
	registry *prometheus.Registry

	// The series of reads, by route (see routemetrics.go).
	perRoute routeVecs
	routesMu sync.Mutex
	routes   map[string]*routeMetrics

	rejections *prometheus.CounterVec
	rejected   map[string]prometheus.Counter
	failures   map[string]prometheus.Counter // attempt failures, by reason
	shadows    map[string]prometheus.Counter // by outcome
	log        *slog.Logger

	replicaAttempts replicaAttempts        // by replica, role and outcome (see replicametrics.go)
	unsolicited     *prometheus.CounterVec // connections closed for strays, by replica and when (see unsolicited.go)
	strayLog        strayLog

	// Tied mode only: nil otherwise.
	tiedCopies   []prometheus.Counter          // by copy: first, second
	tiedDropped  map[string]prometheus.Counter // by when: queued, arrival
	tiedRequests map[string]prometheus.Counter // by outcome
}

func newMetrics(g *Gateway) *metrics {
	m := &metrics{registry: prometheus.NewRegistry(), log: g.log, routes: map[string]*routeMetrics{}}
	m.perRoute = newRouteVecs()
	m.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_rejections_total",
		Help: "Client requests refused before any backend attempt, by reason: max_requests, max_attempts, method, body (a body where none may be, or one that could not be read: 400), body_too_large (a declared read's body over the limit: 413), body_timeout (a declared read's body not whole in time: 408), target, deadline (too little time left: 504), bad_deadline (a malformed Tailgate-Timeout or grpc-timeout: 400).",
	}, []string{"reason"})
	shadows := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_shadow_requests_total",
		Help: "Shadow requests to replicas on probation (copies of answered reads, answers discarded), by outcome: success, failure, canceled (timed out or shut down), skipped (due, but no free slot).",
	}, []string{"outcome"})
	m.shadows = byLabel(shadows, shadowOutcomes)
	m.rejected = byLabel(m.rejections, []string{rejectRequests, rejectAttempts, rejectMethod, rejectBody, rejectBodyTooLarge, rejectBodyTimeout, rejectTarget, rejectDeadline, rejectBadDeadline})
	m.replicaAttempts = newReplicaAttempts()
	m.perRoute.register(m.registry)
	m.registry.MustRegister(m.rejections, shadows, &stateCollector{g: g}, discovery.NewCollector(g.discovered), m.replicaAttempts.vec, buildInfo())
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_attempt_failures_total",
		Help: "Backend attempts that got no acceptable answer, by reason: status (a 5xx), transport (refused, reset, cut short, malformed), tls (a certificate refused, either way; a failed TLS handshake), upgrade (a 101 to a read that asked for none), headers (header block over the limit), body (body over the limit), timeout (the request's time ran out first; neutral for breakers), unsolicited (a new connection got bytes before its first request: see tailgate_unsolicited_total). Losers cancelled for a winner are not counted.",
	}, []string{"reason"})
	m.failures = byLabel(failures, failureReasons)
	m.unsolicited = newUnsolicitedCounter()
	m.registry.MustRegister(failures, m.unsolicited)
	return m
}

// forgetReplica removes the series of a backend that a reload removed: a
// replica that is gone should not be reported at zero rate for ever.
func (m *metrics) forgetReplica(backend string) {
	m.replicaAttempts.forget(backend)
	m.unsolicited.DeletePartialMatch(prometheus.Labels{"replica": replicaLabel(backend)})
}

// attemptFailed counts an attempt failure by reason ("" counts nothing).
func (m *metrics) attemptFailed(reason string) {
	if reason != "" {
		m.failures[reason].Inc()
	}
}

// registerTied adds the series of tied mode, as a route first is.
func (m *metrics) registerTied() {
	if m.tiedCopies != nil {
		return
	}
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

// tiedDrop counts a dropped answer by its tiedwire.DroppedHeader value.
func (m *metrics) tiedDrop(when string) {
	if when != tiedwire.DroppedOnArrival {
		when = tiedwire.DroppedQueued // the only other value a tied.Server sends
	}
	m.tiedDropped[when].Inc()
}

// tiedTally is what a gateway in tied mode has counted: copies sent,
// dropped answers received, and reads by outcome (see replicasView).
type tiedTally struct {
	FirstCopies  int64 `json:"firstCopies"`
	SecondCopies int64 `json:"secondCopies"`
	// DroppedQueued and DroppedOnArrival count answers dropped for their
	// twin, by tiedwire.DroppedHeader.
	DroppedQueued    int64 `json:"droppedQueued"`
	DroppedOnArrival int64 `json:"droppedOnArrival"`
	// Requests counts reads by outcome: first, second, retry, untied,
	// failed.
	Requests map[string]int64 `json:"requests"`
}

// tied reports the tied-mode counts so far; zero when the gateway is not
// in tied mode.
func (m *metrics) tied() tiedTally {
	if m.tiedCopies == nil {
		return tiedTally{}
	}
	c := tiedTally{
		FirstCopies: counterInt(m.tiedCopies[0]), SecondCopies: counterInt(m.tiedCopies[1]),
		DroppedQueued:    counterInt(m.tiedDropped[tiedwire.DroppedQueued]),
		DroppedOnArrival: counterInt(m.tiedDropped[tiedwire.DroppedOnArrival]),
		Requests:         map[string]int64{},
	}
	for _, o := range tiedOutcomes {
		c.Requests[o] = counterInt(m.tiedRequests[o])
	}
	return c
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
		"Hedge delay new reads of the route's busiest class use now (each class's: /debug/routes).", []string{"route"}, nil)
	descCredits = prometheus.NewDesc("tailgate_hedge_budget_credits",
		"Hedges the route's duplicate-work budget would allow right now (its pool's, shared by the pool's routes, or its own).", []string{"route"}, nil)
	descBudgetFraction = prometheus.NewDesc("tailgate_hedge_budget_fraction",
		"Hedge credits the route's budget earns per admitted read (-hedge-fraction): over any interval, hedges <= burst + fraction × reads.", []string{"route"}, nil)
	descBudgetBurst = prometheus.NewDesc("tailgate_hedge_budget_burst",
		"Most hedge credits the route's budget holds (-hedge-burst).", []string{"route"}, nil)
	descGate = prometheus.NewDesc("tailgate_hedge_gate_open",
		"1 while the overload gate of every class of the route's reads lets late-answer hedges through, 0 while one pauses them.", []string{"route"}, nil)
	descGateSignal = prometheus.NewDesc("tailgate_hedge_gate_signal",
		"Classes of the route's reads whose overload gate this signal keeps shut: noHelp (hedges seldom win), slowdown (median latency risen against its baseline), capacity (the request or attempt limit 90% full), unavailable (most replicas' breakers open).", []string{"route", "signal"}, nil)
	descGateHedges = prometheus.NewDesc("tailgate_hedge_gate_window_hedges",
		"Reads of the route in their gates' windows that sent a hedge because an answer was late and have ended, by result: won (a hedge answered first) or lost.", []string{"route", "result"}, nil)
	descGateMedian = prometheus.NewDesc("tailgate_hedge_gate_median_seconds",
		"Median latency of accepted attempts of the route's busiest class that the slowdown signal compares: recent (the last 128 of the last 2s) against baseline (the lower quartile of the 1s medians of the last 5 minutes); 0 while unknown.", []string{"route", "window"}, nil)
	descGateProbes = prometheus.NewDesc("tailgate_hedge_gate_probes_total",
		"Hedges of the route sent through a shut gate to learn whether hedges help again: the first 1s after it shut, then every 2, 4, 5s while they lose.", []string{"route"}, nil)
	descClasses = prometheus.NewDesc("tailgate_route_classes",
		"Classes of read the route's engine keeps a latency window, delay and gate for (at most 64; see tailgate_route_class_overflow_total).", []string{"route"}, nil)
	descOverflow = prometheus.NewDesc("tailgate_route_class_overflow_total",
		"Reads of the route whose class found no room among its 64 and shared the class 'other'.", []string{"route"}, nil)
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
	for _, d := range []*prometheus.Desc{descBreaker, descEWMA, descReplicaInFlight, descDelay, descCredits, descBudgetFraction, descBudgetBurst, descGate,
		descGateSignal, descGateHedges, descGateMedian, descGateProbes, descClasses, descOverflow, descInFlight, descProbation, descTransitions, descP50} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	v := c.g.view.Load()
	for _, s := range v.snapshot(now) {
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
	for _, rt := range v.all() {
		c.collectRoute(ch, rt)
	}
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(c.g.requests.inUse()), "requests")
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(c.g.attempts.inUse()), "attempts")
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(c.g.shadows.slots.inUse()), "shadows")
}

// collectRoute reports rt's hedging gauges: its busiest class's delay and
// medians, and its classes' gates together.
func (c *stateCollector) collectRoute(ch chan<- prometheus.Metric, rt *route) {
	k, name := rt.keep, rt.name
	sum := summarize(k.classes) // evaluates each gate if that is due
	b := k.budget
	ch <- prometheus.MustNewConstMetric(descDelay, prometheus.GaugeValue, sum.busiest.Delay.Seconds(), name)
	ch <- prometheus.MustNewConstMetric(descCredits, prometheus.GaugeValue, b.Credits(), name)
	ch <- prometheus.MustNewConstMetric(descBudgetFraction, prometheus.GaugeValue, b.Fraction(), name)
	ch <- prometheus.MustNewConstMetric(descBudgetBurst, prometheus.GaugeValue, b.Burst(), name)
	ch <- prometheus.MustNewConstMetric(descGate, prometheus.GaugeValue, b2f(sum.shut == 0), name)
	for i, sig := range hedge.AllGateSignals {
		ch <- prometheus.MustNewConstMetric(descGateSignal, prometheus.GaugeValue, float64(sum.signals[i]), name, sig.String())
	}
	ch <- prometheus.MustNewConstMetric(descGateHedges, prometheus.GaugeValue, float64(sum.wins), name, "won")
	ch <- prometheus.MustNewConstMetric(descGateHedges, prometheus.GaugeValue, float64(sum.hedged-sum.wins), name, "lost")
	gs := sum.busiest.Gate
	ch <- prometheus.MustNewConstMetric(descGateMedian, prometheus.GaugeValue, gs.RecentMedian.Seconds(), name, "recent")
	ch <- prometheus.MustNewConstMetric(descGateMedian, prometheus.GaugeValue, gs.BaselineMedian.Seconds(), name, "baseline")
	ch <- prometheus.MustNewConstMetric(descGateProbes, prometheus.CounterValue, float64(sum.probes), name)
	ch <- prometheus.MustNewConstMetric(descClasses, prometheus.GaugeValue, float64(sum.classes), name)
	ch <- prometheus.MustNewConstMetric(descOverflow, prometheus.CounterValue, float64(k.classes.Overflowed()), name)
}

// classSummary is a route's classes taken together.
type classSummary struct {
	busiest                       hedge.Stats // of the class with the most reads in its gate's window
	classes, shut                 int
	signals                       [4]int // by hedge.AllGateSignals
	hedged, wins, probes, windowN int64
}

// summarize sums up the classes of c, each gate evaluated if that is due.
func summarize(c *hedge.Classes) classSummary {
	var s classSummary
	found := false
	for _, cl := range c.List() {
		st := cl.Hedger.Stats()
		s.classes++
		if !st.Gate.Open() {
			s.shut++
		}
		for i, sig := range hedge.AllGateSignals {
			if st.Gate.Shut&sig != 0 {
				s.signals[i]++
			}
		}
		s.hedged += st.Gate.Hedged
		s.wins += st.Gate.HedgeWins
		s.probes += st.Gate.Probes
		if !found || st.Operations > s.busiest.Operations {
			s.busiest, found = st, true
		}
	}
	if !found {
		// No read yet: what the first would use.
		p := c.Policy()
		s.busiest.Delay = p.Delay
		if s.busiest.Delay == 0 {
			s.busiest.Delay = p.Adaptive.Warmup
		}
		s.busiest.Credits = c.Budget().Credits()
	}
	return s
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
