package classes

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
)

func TestClassesConfigRejects(t *testing.T) {
	for _, c := range []Config{
		{Reads: -1}, {Reads: MaxReads + 1}, {Rate: -1}, {Rate: maxRate + 1}, {SearchShare: 1.5}, {IDs: 5},
		{Item: Kind{Fast: 2 * time.Millisecond, Slow: time.Millisecond}},
		{Search: Kind{Fast: time.Millisecond, Slow: time.Second, SlowShare: 0.9}},
		{ItemDelay: -time.Millisecond},
	} {
		if err := c.Validate(); !errors.Is(err, exp.ErrConfig) {
			t.Errorf("%+v: %v, want an exp.ErrConfig", c, err)
		}
	}
	if err := Defaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// Each replica's slow ids are its own: about SlowShare of them, and few
// in common, so the other replica answers nearly every straggler fast.
func TestClassesSlowIDsDiffer(t *testing.T) {
	cfg := Defaults()
	a := slowIDs(cfg, "replica-a", "item", cfg.Item)
	b := slowIDs(cfg, "replica-b", "item", cfg.Item)
	for _, m := range [][]uint64{a.IDs, b.IDs} {
		if n := len(m); n < 25 || n > 80 {
			t.Errorf("%d slow ids of %d, want about 5%%", n, cfg.IDs)
		}
	}
	both := 0
	for _, x := range a.IDs {
		for _, y := range b.IDs {
			if x == y {
				both++
			}
		}
	}
	if both > 10 {
		t.Errorf("%d ids slow on both replicas", both)
	}
}

// A short run, at a rate that keeps the gateway under its 128 reads in
// flight even when -race on a busy machine stalls it: every condition
// reads every path, the direct condition's reads are its attempts, and
// the gateway's attempts are counted by the replicas; the report is JSON
// with one line per condition and kind.
func TestClassesShortRun(t *testing.T) {
	cfg := Config{Reads: 200, Rate: 200, IDs: 100,
		Item:   Kind{Fast: time.Millisecond, Slow: 20 * time.Millisecond, SlowShare: 0.1},
		Search: Kind{Fast: 3 * time.Millisecond, Slow: 30 * time.Millisecond, SlowShare: 0.1},
		Seed:   3}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Conditions) != len(conditions) {
		t.Fatalf("%d conditions", len(rep.Conditions))
	}
	for _, c := range rep.Conditions {
		if c.All.Requests != cfg.Reads || c.All.Failed+c.All.Dropped != 0 || len(c.Endpoints) != 2 {
			t.Errorf("%s: %d reads, %d failed (%s), %d endpoints", c.Name, c.All.Requests, c.All.Failed+c.All.Dropped, c.All.FirstError, len(c.Endpoints))
		}
		if n := c.Endpoints[0].Requests + c.Endpoints[1].Requests; n != cfg.Reads || c.Endpoints[1].Requests == 0 {
			t.Errorf("%s: endpoints read %d and %d", c.Name, c.Endpoints[0].Requests, c.Endpoints[1].Requests)
		}
		// A read costs one attempt, and a hedge at most a second.
		if c.AttemptsPerRead < 1 || c.AttemptsPerRead > 2 {
			t.Errorf("%s: %.3f attempts per read", c.Name, c.AttemptsPerRead)
		}
	}
	if d := rep.Conditions[0]; d.AttemptsPerRead != 1 {
		t.Errorf("direct: %.3f attempts per read, want 1", d.AttemptsPerRead)
	}
	lines := rep.Lines()
	if len(lines) != 2*len(conditions) {
		t.Errorf("%d lines", len(lines))
	}
	b, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(b), `"experiment":"classes"`) || !strings.Contains(string(b), `"path":"/search"`) || !strings.Contains(string(b), `"itemDelayMs":5`) {
		t.Errorf("report %s: %v", b, err)
	}
	if s := rep.Section(); len(s.Tables) != 1 || len(s.Tables[0].Rows) != len(conditions) || len(s.Plots) != 2 {
		t.Errorf("section: %d tables, %d plots", len(s.Tables), len(s.Plots))
	}
}
