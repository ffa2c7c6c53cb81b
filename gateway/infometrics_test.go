package gateway

import (
	"testing"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/buildinfo"
)

// tailgate_build_info is 1, with the labels the version command prints.
func TestBuildInfoGauge(t *testing.T) {
	g, err := New(Config{Backends: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	bi := buildinfo.Get()
	if v := gaugeValue(t, g, "tailgate_build_info", "version", bi.Version, "revision", bi.Revision, "goversion", bi.GoVersion); v != 1 {
		t.Errorf("tailgate_build_info = %v", v)
	}
}

// The budget's settings are exported as the engine uses them: as given,
// the defaults, and tied mode's own.
func TestBudgetGauges(t *testing.T) {
	b, err := hedge.NewBudget(0.25, 7)
	if err != nil {
		t.Fatal(err)
	}
	two := []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}
	for _, tc := range []struct {
		name            string
		cfg             Config
		fraction, burst float64
	}{
		{"given", Config{Backends: two, Policy: hedge.Policy{Budget: b}}, 0.25, 7},
		{"defaults", Config{Backends: two}, hedge.DefaultBudgetFraction, hedge.DefaultBudgetBurst},
		{"tied", Config{Backends: two, Tied: true, MaxInFlightRequests: 20}, 1, 20},
	} {
		g, err := New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if f, bu := gaugeValue(t, g, "tailgate_hedge_budget_fraction"), gaugeValue(t, g, "tailgate_hedge_budget_burst"); f != tc.fraction || bu != tc.burst {
			t.Errorf("%s: fraction %v burst %v, want %v %v", tc.name, f, bu, tc.fraction, tc.burst)
		}
		g.Close()
	}
}
