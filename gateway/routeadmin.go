package gateway

import (
	"encoding/json"
	"net/http"
	"time"
)

// This file: /debug/routes, what each route does with its reads, class by
// class.

// routeView is a route as /debug/routes shows it.
type routeView struct {
	Name string `json:"name"`
	// Match is the route's pattern ("" for the default route), Methods its
	// methods.
	Match   string   `json:"match,omitempty"`
	Methods []string `json:"methods"`
	// Pool names its backends' pool ("default": the top-level Backends).
	Pool     string   `json:"pool"`
	Backends []string `json:"backends"`
	// Mode is ModeHedge or ModeTied; Delay the fixed delay ("" when
	// adaptive), MaxAttempts and TimeoutMs its limits, BudgetFraction and
	// BudgetCredits its budget's.
	Mode           string  `json:"mode"`
	Delay          string  `json:"delay,omitempty"`
	MaxAttempts    int     `json:"maxAttempts"`
	TimeoutMs      float64 `json:"timeoutMs"`
	BudgetFraction float64 `json:"budgetFraction"`
	BudgetCredits  float64 `json:"budgetCredits"`
	// AffinityKey is where the key of a read by key is ("" when off).
	AffinityKey string `json:"affinityKey,omitempty"`
	// Classes are the classes of its reads, busiest first; Overflowed
	// counts the reads that found no room and went to class "other".
	Classes    []classView `json:"classes"`
	Overflowed uint64      `json:"overflowed"`
}

// classView is one class of a route's reads.
type classView struct {
	Class string `json:"class"`
	// Reads counts the reads in the gate's window; Hedged and HedgeWins
	// those that sent a hedge because an answer was late, and those a
	// hedge won.
	Reads     int64 `json:"reads"`
	Hedged    int64 `json:"hedged"`
	HedgeWins int64 `json:"hedgeWins"`
	// P50Ms, P95Ms and P99Ms are its latencies over the adaptive window;
	// DelayMs the hedge delay in force.
	P50Ms   float64 `json:"p50Ms"`
	P95Ms   float64 `json:"p95Ms"`
	P99Ms   float64 `json:"p99Ms"`
	DelayMs float64 `json:"delayMs"`
	// Gate is its overload gate: open or shut, and why.
	Gate gateView `json:"gate"`
}

// routesState returns every route's state, the default route first.
func (g *Gateway) routesState() []routeView {
	v := g.view.Load()
	var out []routeView
	for _, rt := range v.all() {
		p := rt.keep.classes.Policy()
		s := routeView{
			Name: rt.name, Methods: rt.methods, Pool: rt.pool.name, Backends: rt.pool.backends,
			Mode: ModeHedge, MaxAttempts: p.MaxAttempts, TimeoutMs: ms(rt.timeout),
			BudgetFraction: rt.keep.budget.Fraction(), BudgetCredits: rt.keep.budget.Credits(),
			Overflowed: rt.keep.classes.Overflowed(),
		}
		if s.Methods == nil {
			s.Methods = []string{http.MethodGet, http.MethodHead}
		}
		if rt != v.def {
			s.Match = v.cfg.Routes[indexOfRoute(v, rt)].Match
		}
		switch {
		case rt.tied:
			s.Mode = ModeTied
		case rt.fixed > 0:
			s.Delay = rt.fixed.String()
		}
		if rt.keyed() {
			s.AffinityKey = rt.affinityKey.String()
		}
		for _, c := range rt.keep.classes.List() {
			st := c.Hedger.Stats()
			s.Classes = append(s.Classes, classView{
				Class: c.Name, Reads: st.Operations, Hedged: st.Gate.Hedged, HedgeWins: st.Gate.HedgeWins,
				P50Ms: ms(st.Expected), P95Ms: ms(st.P95), P99Ms: ms(st.P99), DelayMs: ms(st.Delay),
				Gate: gateState(st.Gate),
			})
		}
		sortClasses(s.Classes)
		out = append(out, s)
	}
	return out
}

// indexOfRoute returns rt's index in v.routes, which is its Route's in
// v.cfg.Routes.
func indexOfRoute(v *view, rt *route) int {
	for i, r := range v.routes {
		if r == rt {
			return i
		}
	}
	return -1
}

// sortClasses orders classes busiest first, then by name.
func sortClasses(cs []classView) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && (cs[j].Reads > cs[j-1].Reads || cs[j].Reads == cs[j-1].Reads && cs[j].Class < cs[j-1].Class); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// serveRoutes serves /debug/routes.
func (g *Gateway) serveRoutes(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(struct {
		Time   time.Time   `json:"time"`
		Routes []routeView `json:"routes"`
	}{time.Now(), g.routesState()})
}
