package replica

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSnapshotAndAvailable(t *testing.T) {
	s := mustNew(t, 3, Config{FailureThreshold: 2, Cooldown: time.Second})
	s.Done(pickAt(t, s, 0, t0), Success, t0.Add(30*time.Millisecond))
	held := pickAt(t, s, 0, t0)
	s.Done(pickAt(t, s, 1, t0), Failure, t0.Add(time.Millisecond))
	trip(t, s, 2, t0)
	now := t0.Add(30 * time.Millisecond)
	if n := s.Available(now); n != 2 {
		t.Errorf("Available = %d, want 2", n)
	}
	got := s.Snapshot(now)
	want := []State{
		{Name: "http://r0.test", Breaker: Closed, Available: true, EWMA: 30 * time.Millisecond, EWMAMs: 30,
			InFlight: 1, Successes: 1, Picks: 2},
		{Name: "http://r1.test", Breaker: Closed, Available: true, EWMA: ewmaDuration(s, 1, now),
			EWMAMs: ewmaOf(s, 1, now) / 1e6, Failures: 1, Picks: 1, ConsecutiveFailures: 1},
		{Name: "http://r2.test", Breaker: Open, Generation: 1, OpenUntil: t0.Add(time.Second),
			Failures: 2, Picks: 2, ConsecutiveFailures: 2},
	}
	for i := range want {
		if !got[i].OpenUntil.Equal(want[i].OpenUntil) {
			t.Errorf("replica %d: OpenUntil %v, want %v", i, got[i].OpenUntil, want[i].OpenUntil)
		}
		got[i].OpenUntil = want[i].OpenUntil
		if got[i] != want[i] {
			t.Errorf("replica %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if got[1].EWMA >= time.Millisecond || got[1].EWMA <= 0 {
		t.Errorf("replica 1: EWMA %v, want 1ms decayed for 29ms", got[1].EWMA)
	}
	s.Done(held, Success, now)
	if st := stateOfReplica(s, 0, now); st.InFlight != 0 || st.Successes != 2 {
		t.Errorf("after Done: %+v", st)
	}
}

func ewmaDuration(s *Set, i int, now time.Time) time.Duration {
	return time.Duration(ewmaOf(s, i, now) + 0.5)
}

func TestStateJSON(t *testing.T) {
	s := mustNew(t, 2, Config{FailureThreshold: 1, Cooldown: time.Second})
	s.Done(pickAt(t, s, 0, t0), Success, t0.Add(1500*time.Microsecond))
	trip(t, s, 1, t0)
	b, err := json.Marshal(s.Snapshot(t0.Add(1500 * time.Microsecond)))
	if err != nil {
		t.Fatal(err)
	}
	var raw []map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	keys := []string{"available", "breaker", "canceled", "consecutiveFailures", "ewmaMs", "failures",
		"generation", "inFlight", "name", "picks", "staleOutcomes", "successes"}
	// A closed breaker has no reopening time: the field is left out.
	if got := slices.Sorted(maps.Keys(raw[0])); !slices.Equal(got, keys) {
		t.Errorf("closed replica JSON keys %v, want %v", got, keys)
	}
	if raw[0]["breaker"] != "closed" || raw[0]["ewmaMs"] != 1.5 || raw[0]["name"] != "http://r0.test" {
		t.Errorf("closed replica JSON: %s", b)
	}
	until, _ := raw[1]["openUntil"].(string)
	if at, err := time.Parse(time.RFC3339Nano, until); raw[1]["breaker"] != "open" || err != nil || !at.Equal(t0.Add(time.Second)) {
		t.Errorf("open replica JSON: %s", b)
	}
	// It decodes back.
	var back []State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back[1].Breaker != Open || !back[1].OpenUntil.Equal(t0.Add(time.Second)) || back[0].EWMAMs != 1.5 {
		t.Errorf("decoded %+v", back)
	}
	if strings.Contains(string(b), "EWMA\"") {
		t.Errorf("EWMA (a Duration) leaked into JSON: %s", b)
	}
}

func TestBreakerStateText(t *testing.T) {
	for st, want := range map[BreakerState]string{Closed: "closed", Open: "open", HalfOpen: "half-open"} {
		if st.String() != want {
			t.Errorf("%d.String() = %q", st, st.String())
		}
		b, err := st.MarshalText()
		if err != nil || string(b) != want {
			t.Errorf("%d.MarshalText() = %q, %v", st, b, err)
		}
		var back BreakerState
		if err := back.UnmarshalText(b); err != nil || back != st {
			t.Errorf("UnmarshalText(%q) = %v, %v", b, back, err)
		}
	}
	bad := BreakerState(7)
	if bad.String() != "BreakerState(7)" {
		t.Errorf("String() = %q", bad.String())
	}
	if _, err := bad.MarshalText(); err == nil || !strings.HasPrefix(err.Error(), "replica: ") {
		t.Errorf("MarshalText of an unknown state: %v", err)
	}
	var back BreakerState
	if err := back.UnmarshalText([]byte("ajar")); err == nil || !strings.HasPrefix(err.Error(), "replica: ") {
		t.Errorf("UnmarshalText(ajar): %v", err)
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{Success: "success", Failure: "failure", Canceled: "canceled", 5: "Outcome(5)"} {
		if o.String() != want {
			t.Errorf("%d.String() = %q, want %q", o, o.String(), want)
		}
	}
}
