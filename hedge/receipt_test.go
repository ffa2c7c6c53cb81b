package hedge

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleReceipt() Receipt {
	return Receipt{
		Version: ReceiptVersion, Outcome: OutcomeWon, Delay: Millis(25 * time.Millisecond),
		WinnerAttempt: 1, WinnerTarget: 1, WinnerTargetName: "http://127.0.0.1:8082",
		WinnerLatency: Millis(31234567), AttemptsLaunched: 2,
		HedgesSuppressed:       Suppressions{Budget: 1, Gate: 2, Deadline: 3, MaxAttempts: 4, NoTarget: 5, Capacity: 6},
		CancellationsRequested: 1, CancellationsObserved: 1,
		Attempts: []AttemptRecord{
			{Index: 0, Target: 0, TargetName: "http://127.0.0.1:8081", Trigger: TriggerPrimary, Duration: Millis(31234567), Fate: FateCanceled, Error: "context canceled"},
			{Index: 1, Target: 1, TargetName: "http://127.0.0.1:8082", Trigger: TriggerDelay, Start: Millis(25 * time.Millisecond), Duration: Millis(6234567), Fate: FateWon},
		},
	}
}

func TestReceiptJSONShape(t *testing.T) {
	b, err := json.Marshal(sampleReceipt())
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{
		`"version":1`, `"outcome":"won"`, `"delayMs":25,`, `"winnerAttempt":1`, `"winnerTarget":1`,
		`"winnerTargetName":"http://127.0.0.1:8082"`, `"winnerLatencyMs":31.234567`, `"attemptsLaunched":2`,
		`"hedgesSuppressed":{"budget":1,"gate":2,"deadline":3,"maxAttempts":4,"noTarget":5,"capacity":6}`,
		`"cancellationsRequested":1`, `"cancellationsObserved":1`, `"lateCompletions":0`, `"unobserved":0`,
		`"trigger":"delay"`, `"fate":"canceled"`, `"startMs":25`, `"durationMs":6.234567`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("receipt JSON lacks %s:\n%s", want, s)
		}
	}
	var back Receipt
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, sampleReceipt()) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, sampleReceipt())
	}
}

func TestMillisJSON(t *testing.T) {
	cases := map[time.Duration]string{
		0: "0", time.Nanosecond: "0.000001", 1500 * time.Microsecond: "1.5", -2 * time.Millisecond: "-2",
		time.Duration(math.MaxInt64): "9223372036854.775807", time.Duration(math.MinInt64): "-9223372036854.775808",
	}
	for d, want := range cases {
		b, _ := json.Marshal(Millis(d))
		if string(b) != want {
			t.Errorf("Millis(%d) = %s, want %s", d, b, want)
		}
		var m Millis
		if err := json.Unmarshal(b, &m); err != nil || time.Duration(m) != d {
			t.Errorf("unmarshal %s = %d, %v; want %d", b, m, err, d)
		}
	}
	var m Millis
	if err := json.Unmarshal([]byte("1e3"), &m); err != nil || m.Duration() != time.Second {
		t.Errorf("1e3 ms = %v, %v", m.Duration(), err)
	}
	if err := json.Unmarshal([]byte("1.0000004"), &m); err != nil || m.Duration() != time.Millisecond {
		t.Errorf("sub-nanosecond digits: %v, %v", m.Duration(), err)
	}
	for _, bad := range []string{`"5"`, "1e300", "-1e300"} {
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("unmarshal %s: no error", bad)
		}
	}
	if err := m.UnmarshalJSON([]byte("null")); err != nil {
		t.Error(err)
	}
}

// Printed, a Millis reads as a duration: fmt.Print(receipt.Delay) once
// printed 10000000.
func TestMillisString(t *testing.T) {
	r := sampleReceipt()
	if got := fmt.Sprint(r.Delay); got != "25ms" {
		t.Errorf("fmt.Sprint(Delay) = %q, want 25ms", got)
	}
	if got := fmt.Sprintf("%v %s", r.WinnerLatency, Millis(1500*time.Microsecond)); got != "31.234567ms 1.5ms" {
		t.Errorf("got %q", got)
	}
	if got := fmt.Sprintf("%+v", r.Attempts[1]); !strings.Contains(got, "Start:25ms Duration:6.234567ms") {
		t.Errorf("an attempt record printed: %s", got)
	}
}

func TestNamesRoundTrip(t *testing.T) {
	for i := range len(fateNames) {
		var f Fate
		if err := f.UnmarshalText([]byte(Fate(i).String())); err != nil || f != Fate(i) {
			t.Errorf("fate %d", i)
		}
	}
	for i := range len(outcomeNames) {
		var o Outcome
		if err := o.UnmarshalText([]byte(Outcome(i).String())); err != nil || o != Outcome(i) {
			t.Errorf("outcome %d", i)
		}
	}
	for i := range len(triggerNames) {
		var tr Trigger
		if err := tr.UnmarshalText([]byte(Trigger(i).String())); err != nil || tr != Trigger(i) {
			t.Errorf("trigger %d", i)
		}
	}
	var f Fate
	var o Outcome
	var tr Trigger
	if f.UnmarshalText([]byte("x")) == nil || o.UnmarshalText([]byte("x")) == nil || tr.UnmarshalText([]byte("x")) == nil {
		t.Error("unknown names accepted")
	}
	if Fate(99).String() != "unknown" || Outcome(9).String() != "unknown" || Trigger(9).String() != "unknown" ||
		SuppressReason(0).String() != "unknown" || EventKind(0).String() != "unknown" || EventWin.String() != "win" {
		t.Error("String of out-of-range values")
	}
	for _, r := range SuppressReasons {
		var s Suppressions
		s.add(r)
		if s.Total() != 1 {
			t.Errorf("reason %v not counted", r)
		}
	}
}

// FuzzReceiptJSON: any receipt that decodes re-encodes to a form that
// decodes to the same receipt.
func FuzzReceiptJSON(f *testing.F) {
	b, _ := json.Marshal(sampleReceipt())
	f.Add(string(b))
	f.Add(`{"version":1,"delayMs":0.000001,"winnerLatencyMs":-3.5,"attempts":[]}`)
	f.Add(`{"delayMs":1e-7,"winnerLatencyMs":9223372036854.775807}`)
	f.Fuzz(func(t *testing.T, s string) {
		var r Receipt
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			return
		}
		b1, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal %+v: %v", r, err)
		}
		var r2 Receipt
		if err := json.Unmarshal(b1, &r2); err != nil {
			t.Fatalf("re-decode %s: %v", b1, err)
		}
		b2, _ := json.Marshal(r2)
		if string(b1) != string(b2) {
			t.Fatalf("not stable:\n%s\n%s", b1, b2)
		}
	})
}
