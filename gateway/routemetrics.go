package gateway

import (
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailgate-dev/tailgate/hedge"
)

// This file: the series of reads, by route. Each route's children are
// resolved once, when the route first appears, so that counting needs no
// label lookup on the request path; a route a reload removes has its
// series deleted.

// routeVecs are the vectors of the series of reads, each with a route
// label.
type routeVecs struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	attempts    *prometheus.CounterVec
	hedgeWins   *prometheus.CounterVec
	suppressed  *prometheus.CounterVec
	late        *prometheus.CounterVec
	cancelsSeen *prometheus.CounterVec
	gateMoves   *prometheus.CounterVec
}

func newRouteVecs() routeVecs {
	return routeVecs{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailgate_requests_total",
			Help: "Client requests answered, by route and HTTP status code (code 0: the client left first).",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tailgate_request_duration_seconds",
			Help:    "Time from receiving a client request to its answer, hedges included, by route.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10},
		}, []string{"route"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailgate_attempts_total",
			Help: "Backend attempts started, by route and role: primary or hedge (in tied mode, a second copy or an attempt after a failure).",
		}, []string{"route", "role"}),
		hedgeWins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailgate_hedge_wins_total",
			Help: "Requests answered by a hedge (in tied mode, the second attempt) rather than the primary, by route.",
		}, []string{"route"}),
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailgate_hedges_suppressed_total",
			Help: "Hedges wanted but not sent, by route and reason: budget, gate, deadline, maxAttempts, noTarget, capacity.",
		}, []string{"route", "reason"}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailgate_late_completions_total",
			Help: "Losing attempts whose work completed after the winner (within the observation window), by route.",
		}, []string{"route"}),
		cancelsSeen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailgate_cancellations_observed_total",
			Help: "Losing attempts seen to stop after being cancelled, by route.",
		}, []string{"route"}),
		gateMoves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailgate_hedge_gate_transitions_total",
			Help: "Times the overload gate of a class of the route's reads shut (to=shut) or reopened (to=open).",
		}, []string{"route", "to"}),
	}
}

func (v routeVecs) register(r *prometheus.Registry) {
	r.MustRegister(v.requests, v.latency, v.attempts, v.hedgeWins, v.suppressed, v.late, v.cancelsSeen, v.gateMoves)
}

// routeMetrics are one route's children, and the Observer of its
// classes' engine.
type routeMetrics struct {
	name        string
	vecs        *routeVecs
	byCode      map[int]prometheus.Counter // pre-resolved common codes
	latency     prometheus.Observer
	primaries   prometheus.Counter
	hedges      prometheus.Counter
	hedgeWins   prometheus.Counter
	suppressed  map[hedge.SuppressReason]prometheus.Counter
	late        prometheus.Counter
	cancelsSeen prometheus.Counter
	gateMoves   map[bool]prometheus.Counter // by whether the gate shut (false: reopened)
	log         *slog.Logger

	gateMu sync.Mutex           // orders the gates' changes, which arrive from any goroutine
	gates  map[string]*gateSeen // each class's gate, as last reported
}

// route returns the children of route name, made on first use.
func (m *metrics) route(name string) *routeMetrics {
	m.routesMu.Lock()
	defer m.routesMu.Unlock()
	if r := m.routes[name]; r != nil {
		return r
	}
	v := &m.perRoute
	r := &routeMetrics{
		name: name, vecs: v, log: m.log, gates: map[string]*gateSeen{},
		byCode:      map[int]prometheus.Counter{},
		latency:     v.latency.WithLabelValues(name),
		primaries:   v.attempts.WithLabelValues(name, "primary"),
		hedges:      v.attempts.WithLabelValues(name, "hedge"),
		hedgeWins:   v.hedgeWins.WithLabelValues(name),
		suppressed:  map[hedge.SuppressReason]prometheus.Counter{},
		late:        v.late.WithLabelValues(name),
		cancelsSeen: v.cancelsSeen.WithLabelValues(name),
		gateMoves:   map[bool]prometheus.Counter{true: v.gateMoves.WithLabelValues(name, "shut"), false: v.gateMoves.WithLabelValues(name, "open")},
	}
	for _, c := range []int{0, 200, 204, 206, 301, 302, 304, 400, 401, 403, 404, 405, 429, 500, 502, 503, 504} {
		r.byCode[c] = v.requests.WithLabelValues(name, strconv.Itoa(c))
	}
	for _, reason := range hedge.SuppressReasons {
		r.suppressed[reason] = v.suppressed.WithLabelValues(name, reason.String())
	}
	m.routes[name] = r
	return r
}

// viewChanged registers tied mode's series once a route of v is tied, and
// deletes the series of the routes of old that v no longer has (nil old:
// none).
func (m *metrics) viewChanged(old, v *view) {
	for _, rt := range v.all() {
		if rt.tied {
			m.registerTied()
		}
	}
	if old == nil {
		return
	}
	keep := map[string]bool{}
	for _, rt := range v.all() {
		keep[rt.name] = true
	}
	m.routesMu.Lock()
	defer m.routesMu.Unlock()
	for _, rt := range old.all() {
		if keep[rt.name] {
			continue
		}
		delete(m.routes, rt.name)
		l := prometheus.Labels{"route": rt.name}
		for _, vec := range []interface {
			DeletePartialMatch(prometheus.Labels) int
		}{m.perRoute.requests, m.perRoute.latency, m.perRoute.attempts, m.perRoute.hedgeWins, m.perRoute.suppressed,
			m.perRoute.late, m.perRoute.cancelsSeen, m.perRoute.gateMoves} {
			vec.DeletePartialMatch(l)
		}
	}
}

// all returns v's routes, the default route first.
func (v *view) all() []*route { return append([]*route{v.def}, v.routes...) }

func (r *routeMetrics) observeRequest(code int, d time.Duration) {
	c, ok := r.byCode[code]
	if !ok {
		c = r.vecs.requests.WithLabelValues(r.name, strconv.Itoa(code))
	}
	c.Inc()
	r.latency.Observe(d.Seconds())
}

// Wants implements hedge's optional event filter: receipts are not
// needed for counts.
func (r *routeMetrics) Wants(k hedge.EventKind) bool {
	switch k {
	case hedge.EventLaunch, hedge.EventWin, hedge.EventSuppress, hedge.EventReport, hedge.EventGate:
		return true
	}
	return false
}

// Observe implements hedge.Observer.
func (r *routeMetrics) Observe(e hedge.Event) {
	switch e.Kind {
	case hedge.EventLaunch:
		if e.Attempt.IsHedge() {
			r.hedges.Inc()
		} else {
			r.primaries.Inc()
		}
	case hedge.EventWin:
		if e.Attempt.IsHedge() {
			r.hedgeWins.Inc()
		}
	case hedge.EventSuppress:
		if c, ok := r.suppressed[e.Reason]; ok {
			c.Inc()
		}
	case hedge.EventReport:
		switch e.Fate {
		case hedge.FateLate:
			r.late.Inc()
		case hedge.FateCanceled:
			r.cancelsSeen.Inc()
		}
	case hedge.EventGate:
		r.gateChanged(e.Class, e.Gate)
	}
}

// gateSeen is a class's overload gate as last reported.
type gateSeen struct {
	changes uint64    // the Changes of the last change reported
	shut    bool      // to tell moves from changes of signal
	shutAt  time.Time // when it last shut
}

// gateChanged counts and logs a change of class's overload gate: one line
// when it shuts, one when it reopens, one when the evidence keeping it
// shut changes.
func (r *routeMetrics) gateChanged(class string, st *hedge.GateState) {
	r.gateMu.Lock()
	defer r.gateMu.Unlock()
	seen := r.gates[class]
	if seen == nil {
		// At most hedge.MaxClasses + 1 classes, and their gates open
		// unless reported shut: a class forgotten and made again starts
		// from its first change.
		seen = &gateSeen{}
		r.gates[class] = seen
	}
	if st.Changes <= seen.changes {
		return // overtaken by a later change, already reported
	}
	seen.changes = st.Changes
	shut := !st.Open()
	moved := seen.shut != shut
	seen.shut = shut
	if moved {
		r.gateMoves[shut].Inc()
	}
	switch {
	case shut && moved:
		seen.shutAt = st.Since
		r.log.Warn("overload gate shut: hedges for late answers paused", "route", r.name, "class", class, "signals", st.Shut.String(), "evidence", st.String())
	case shut:
		r.log.Info("overload gate still shut, on new evidence", "route", r.name, "class", class, "signals", st.Shut.String(), "evidence", st.String())
	default:
		// Why it reopened: no signal of overload is left, and the figures
		// each signal is judged on say what changed.
		r.log.Info("overload gate reopened: hedges for late answers resume", "route", r.name, "class", class, "shutFor", st.Since.Sub(seen.shutAt).Round(time.Millisecond),
			"state", st.String(), "evidence", gateEvidence(st))
	}
}
