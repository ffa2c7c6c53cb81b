package gateway

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
)

// Admin returns the handler for the admin listener, which belongs on an
// address of its own, away from client traffic:
//
//	/healthz         200 while the process serves (liveness only)
//	/readyz          200 when at least one replica would take a request, else 503; 503 for good once StartDrain is called;
//	                 a line per discovered name that is stale (see SetDiscovery)
//	/metrics         Prometheus text format
//	/debug/replicas  JSON: the mode, each replica's breaker, latency, probation and counts, the hedger's state,
//	                 and the discovered names
//	/debug/routes    JSON: each route (the top-level settings' "default" first): its match, pool and settings,
//	                 and each class of its reads: reads, p50/p95/p99, the delay in force, hedges sent and
//	                 won, the gate's state and reason
//	/debug/partitions  JSON, in affinity mode: where the key is, each partition's owners, each replica's load,
//	                 recent moves with their reasons, hot keys (404 when affinity mode is off)
func (g *Gateway) Admin() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		// Readiness is observed (and its changes logged) whether or not
		// the gateway drains: draining is for good, and says so itself.
		ready := g.observeReady(time.Now())
		if g.draining.Load() {
			// Load balancers stop sending before the listener closes.
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("draining\n"))
			return
		}
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("no replica available\n"))
			writeStale(w, g.discovered())
			return
		}
		w.Write([]byte("ready\n"))
		writeStale(w, g.discovered())
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.metrics.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /debug/replicas", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(g.Debug(time.Now()))
	})
	mux.HandleFunc("GET /debug/routes", g.serveRoutes)
	mux.HandleFunc("GET /debug/partitions", g.servePartitions)
	return mux
}

// Modes, as DebugState shows them.
const (
	ModeHedge = "hedge" // reads are hedged after a delay
	ModeTied  = "tied"  // reads are tied requests (Config.Tied)
)

// DebugState is what /debug/replicas shows.
type DebugState struct {
	// Mode is ModeHedge or ModeTied.
	Mode string `json:"mode"`
	// Replicas are the replicas' states; each one's probation (status,
	// since, reason, latency against its peers', shadows) is under
	// "probation", absent when probation is off.
	Replicas []replica.State `json:"replicas"`
	// Draining are the replicas a reload or discovery removed whose
	// attempts are still in flight: they get no new read, and each
	// leaves the list once its last attempt ends. Absent when none is.
	Draining  []replica.State `json:"draining,omitempty"`
	Hedge     HedgeState      `json:"hedge"`
	InFlight  InFlight        `json:"inFlight"`
	Probation ProbationState  `json:"probation"`
	// Tied is tied mode's settings and counts; absent in hedge mode.
	Tied *TiedState `json:"tied,omitempty"`
	// Discovery is the discovered names' state; absent when none is.
	Discovery []DiscoveryStatus `json:"discovery,omitempty"`
}

// TiedState is tied mode's settings and what it has counted.
type TiedState struct {
	// DelayMs is how long a first copy waits alone (0: both at once).
	DelayMs float64 `json:"delayMs"`
	TiedCounts
}

// ProbationState is the gateway's side of probation: settings, how many
// replicas are on probation against the cap, and the shadow requests sent.
type ProbationState struct {
	Enabled        bool    `json:"enabled"`
	OnProbation    int     `json:"onProbation"`
	MaxOnProbation int     `json:"maxOnProbation"`
	Factor         float64 `json:"factor"`
	ExitFactor     float64 `json:"exitFactor"`
	WindowMs       float64 `json:"windowMs"`
	MinSamples     int     `json:"minSamples"`
	ShadowRate     float64 `json:"shadowRate"`
	// MinExcessMs is how far above its peers' a replica's median must be,
	// as well as Factor times, to go on probation; 0: no floor.
	MinExcessMs float64 `json:"minExcessMs"`
	// Shadows counts shadow requests by outcome: success, failure,
	// canceled, skipped.
	Shadows map[string]int64 `json:"shadows"`
}

// HedgeState is the hedging engine's shared state.
type HedgeState struct {
	DelayMs        float64 `json:"delayMs"`
	ExpectedMs     float64 `json:"expectedMs"`
	Credits        float64 `json:"budgetCredits"`
	GateOpen       bool    `json:"gateOpen"`
	WindowRequests int64   `json:"windowRequests"`
	WindowWanted   int64   `json:"windowWantedHedges"`
	// Gate is the overload gate's state and evidence.
	Gate GateState `json:"gate"`
}

// GateState is the overload gate's state and the evidence behind it (see
// hedge.Gate).
type GateState struct {
	Open bool `json:"open"`
	// Signals names the signals keeping the gate shut: noHelp, slowdown,
	// capacity, unavailable; empty while it is open.
	Signals []string `json:"signals"`
	// Reason explains the state in a line: "open", or "shut: " and each
	// signal's evidence.
	Reason string `json:"reason"`
	// Since is when the gate last opened or shut.
	Since time.Time `json:"since"`
	// WindowHedged counts the requests in the window that sent a hedge
	// because an answer was late and have ended; WindowHedgeWins those a
	// hedge won.
	WindowHedged    int64 `json:"windowHedged"`
	WindowHedgeWins int64 `json:"windowHedgeWins"`
	// RecentMedianMs and BaselineMedianMs are the median latencies the
	// slowdown signal compares (0 while unknown).
	RecentMedianMs   float64 `json:"recentMedianMs"`
	BaselineMedianMs float64 `json:"baselineMedianMs"`
	// RiseHedged counts the requests that sent a hedge since the median
	// rose (0 while it has not), RiseFastWins those a hedge won at the
	// old speed: enough of them, and the rise is not taken for overload.
	RiseHedged   int64 `json:"riseHedged"`
	RiseFastWins int64 `json:"riseFastWins"`
	// InUse is the fuller of the request and attempt limits' use, and
	// Unavailable the share of replicas refusing attempts, as last seen.
	InUse       float64 `json:"inUse"`
	Unavailable float64 `json:"unavailable"`
	// Probes counts the hedges sent while the gate was shut.
	Probes int64 `json:"probes"`
	// Unproven is set while late-answer hedges go one at a time until one
	// shows that hedges help; Surge while late answers have surged (a
	// sign of overload that comes before the median rises).
	Unproven bool `json:"unproven"`
	Surge    bool `json:"surge"`
}

func gateState(s hedge.GateState) GateState {
	return GateState{
		Open: s.Open(), Signals: s.Shut.Names(), Reason: s.String(), Since: s.Since,
		WindowHedged: s.Hedged, WindowHedgeWins: s.HedgeWins,
		RecentMedianMs: ms(s.RecentMedian), BaselineMedianMs: ms(s.BaselineMedian),
		RiseHedged: s.RiseHedged, RiseFastWins: s.RiseFastWins,
		InUse: s.Load.InUse, Unavailable: s.Load.Unavailable, Probes: s.Probes,
		Unproven: s.Unproven, Surge: s.Surge,
	}
}

// InFlight reports the limits and their use.
type InFlight struct {
	Requests    int64 `json:"requests"`
	MaxRequests int64 `json:"maxRequests"`
	Attempts    int64 `json:"attempts"`
	MaxAttempts int64 `json:"maxAttempts"`
	Shadows     int64 `json:"shadows"`
	MaxShadows  int64 `json:"maxShadows"`
}

// Debug returns the gateway's state at now.
func (g *Gateway) Debug(now time.Time) DebugState {
	v := g.view.Load()
	st := summarize(v.def.keep.classes).busiest // evaluates the gates if that is due
	d := DebugState{
		Mode:     ModeHedge,
		Replicas: v.snapshot(now),
		Draining: g.leaving.draining(now),
		Hedge: HedgeState{
			DelayMs: ms(st.Delay), ExpectedMs: ms(st.Expected), Credits: st.Credits,
			GateOpen: st.Gate.Open(), WindowRequests: st.Operations, WindowWanted: st.WantedHedges,
			Gate: gateState(st.Gate),
		},
		InFlight: InFlight{
			Requests: g.requests.inUse(), MaxRequests: g.requests.max.Load(),
			Attempts: g.attempts.inUse(), MaxAttempts: g.attempts.max.Load(),
			Shadows: g.shadows.slots.inUse(), MaxShadows: g.shadows.slots.max.Load(),
		},
		Probation: g.probationState(v.defaultPool().set),
		Discovery: g.discovered(),
	}
	if v.def.tied {
		d.Mode = ModeTied
		d.Tied = &TiedState{DelayMs: ms(max(v.cfg.TiedDelay, 0)), TiedCounts: g.metrics.tied()}
	}
	return d
}

func (g *Gateway) probationState(set *replica.Set) ProbationState {
	p := set.Config().Probation
	st := ProbationState{
		Enabled: p.Enabled, OnProbation: set.OnProbation(), MaxOnProbation: p.MaxOnProbation(set.Len()),
		Factor: p.Factor, ExitFactor: p.ExitFactor, MinExcessMs: ms(max(p.MinExcess, 0)), WindowMs: ms(p.Window), MinSamples: p.MinSamples,
		ShadowRate: p.ShadowRate, Shadows: map[string]int64{},
	}
	if !p.Enabled {
		st.MaxOnProbation = 0
	}
	for _, o := range shadowOutcomes {
		st.Shadows[o] = counterInt(g.metrics.shadows[o])
	}
	return st
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// Registry returns the Prometheus registry holding the gateway's series,
// which Admin serves at /metrics: gather from it, or register it with a
// registry of your own.
func (g *Gateway) Registry() *prometheus.Registry { return g.metrics.registry }

var _ hedge.Steering = (*exchange)(nil)

// snapshot returns the state of every pool's replicas at now, the default
// pool's first.
func (v *view) snapshot(now time.Time) []replica.State {
	out := v.defaultPool().set.Snapshot(now)
	for _, rt := range v.routes {
		if p := rt.pool; p != v.defaultPool() && p.name == rt.name {
			out = append(out, p.set.Snapshot(now)...)
		}
	}
	return out
}
