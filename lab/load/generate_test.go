package load

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestGenerateOpenLoopMeasuresFromSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first request stalls 100ms; an open loop keeps sending on
		// schedule, and each latency counts from its scheduled time.
		outs := Generate(t.Context(), Config{Requests: 50, Rate: 100, Seed: 3}, func(ctx context.Context, i int) error {
			if i == 0 {
				time.Sleep(100 * time.Millisecond)
			} else {
				time.Sleep(time.Millisecond)
			}
			return nil
		})
		if outs[0].Latency != 100*time.Millisecond {
			t.Errorf("first latency %v", outs[0].Latency)
		}
		for i, o := range outs[1:] {
			if o.Err != nil || o.Latency != time.Millisecond {
				t.Fatalf("request %d: %+v: an open loop must not wait for the stalled one", i+1, o)
			}
			if i > 0 && o.Scheduled < outs[i].Scheduled {
				t.Fatalf("schedule goes backwards at %d", i+1)
			}
		}
		// 50 arrivals at 100/s span about half a second.
		if last := outs[49].Scheduled; last < 300*time.Millisecond || last > 800*time.Millisecond {
			t.Errorf("last arrival at %v for 50 at 100/s", last)
		}
	})
}

func TestGenerateOpenLoopDropsBeyondConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		outs := Generate(t.Context(), Config{Requests: 20, Rate: 1000, Concurrency: 2, Seed: 1}, func(ctx context.Context, i int) error {
			time.Sleep(time.Second) // nothing comes back in time
			return nil
		})
		s := Summarize(outs, time.Second)
		if s.Dropped != 18 || s.Succeeded != 2 {
			t.Errorf("summary %+v: with 2 outstanding allowed, 18 must be dropped, not delayed", s)
		}
	})
}

func TestGenerateClosedLoopAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		outs := Generate(t.Context(), Config{Requests: 10, Concurrency: 2}, func(ctx context.Context, i int) error {
			n.Add(1)
			time.Sleep(10 * time.Millisecond)
			if i == 3 {
				return errors.New("boom")
			}
			return nil
		})
		s := Summarize(outs, 50*time.Millisecond)
		if n.Load() != 10 || s.Succeeded != 9 || s.Failed != 1 || s.FirstError != "boom" || s.P90Ms != 10 || !math.IsInf(s.P99Ms, 1) || s.GoodputPerSec != 180 {
			t.Errorf("summary %+v", s)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 25*time.Millisecond)
		defer cancel()
		outs = Generate(ctx, Config{Requests: 100, Rate: 100}, func(ctx context.Context, i int) error { return nil })
		if errors.Is(outs[0].Err, context.DeadlineExceeded) || !errors.Is(outs[99].Err, context.DeadlineExceeded) {
			t.Errorf("cancelled run: first %v last %v", outs[0].Err, outs[99].Err)
		}
	})
}

// The pacer arms its timer early by the lateness it has measured, and a
// request sent early is measured from its send, never from a schedule it
// beat.
func TestPacerSendsEarlyByMeasuredLag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := pacer{lag: 2 * time.Millisecond}
		start := time.Now()
		from := p.wait(t.Context(), start.Add(10*time.Millisecond), 10*time.Millisecond)
		if sent := time.Since(start); sent != 8*time.Millisecond || !from.Equal(start.Add(8*time.Millisecond)) {
			t.Errorf("sent at %v, measured from %v; want both at 8ms", sent, from.Sub(start))
		}
		// Timers here fire on time: the estimate decays towards no lag.
		if p.lag >= 2*time.Millisecond {
			t.Errorf("lag %v after an on-time firing", p.lag)
		}
		// Never earlier than half the gap.
		p.lag = time.Second
		start = time.Now()
		p.wait(t.Context(), start.Add(10*time.Millisecond), 10*time.Millisecond)
		if sent := time.Since(start); sent != 5*time.Millisecond {
			t.Errorf("sent at %v with a huge lag; want half the 10ms gap", sent)
		}
		// Due already: at once, measured from the schedule.
		start = time.Now()
		if from := p.wait(t.Context(), start.Add(-time.Millisecond), time.Millisecond); !from.Equal(start.Add(-time.Millisecond)) {
			t.Errorf("late send measured from %v", from.Sub(start))
		}
	})
}

// Generate sends exactly the arrivals PoissonArrivals counts: all before
// the window's end, the next one at or after it.
func TestOverloadArrivalsMatchGenerate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := 300 * time.Millisecond
		for i, rate := range []float64{50, 200, 1000} {
			offer := Config{Rate: rate, Seed: PointSeed(7, i)}
			n := PoissonArrivals(offer, d)
			offer.Requests = n + 1
			outs := Generate(t.Context(), offer, func(context.Context, int) error { return nil })
			if n > 0 && outs[n-1].Scheduled >= d {
				t.Errorf("rate %v: arrival %d at %v, past the window %v", rate, n-1, outs[n-1].Scheduled, d)
			}
			if outs[n].Scheduled < d {
				t.Errorf("rate %v: arrival %d at %v falls in the window %v but was not counted", rate, n, outs[n].Scheduled, d)
			}
		}
	})
}

// The count of arrivals is a Poisson variable: over many seeds its mean
// and variance are both near rate × duration (a fixed count would have no
// variance). Deterministic: the seeds are fixed.
func TestOverloadArrivalsArePoisson(t *testing.T) {
	const runs, rate = 400, 100.0
	d := 2 * time.Second
	mean := rate * d.Seconds()
	var sum, sq float64
	for i := range runs {
		x := float64(PoissonArrivals(Config{Rate: rate, Seed: PointSeed(1, i)}, d))
		sum += x
		sq += x * x
	}
	m := sum / runs
	v := sq/runs - m*m
	// The mean's standard error is sqrt(200/400) ≈ 0.7; the variance's
	// about 200 × sqrt(2/400) ≈ 14.
	if math.Abs(m-mean) > 5 || v < mean*0.6 || v > mean*1.4 {
		t.Errorf("counts: mean %.1f, variance %.1f; want both near %.0f", m, v, mean)
	}
	if PoissonArrivals(Config{Rate: 0, Seed: 1}, d) != 0 {
		t.Error("no arrivals at rate 0")
	}
}
