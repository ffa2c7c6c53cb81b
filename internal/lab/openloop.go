package lab

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Load describes how requests are offered to a system under test.
type Load struct {
	// Requests is how many requests are sent.
	Requests int
	// Rate is the offered load in requests per second. Requests are sent
	// at scheduled times (Poisson arrivals) whether or not earlier ones
	// have been answered (open loop), and latency is measured from the
	// scheduled time, so a stalled system cannot hide its queue
	// (no coordinated omission). An idle Go process wakes from a timer up
	// to a millisecond late, so the generator arms each timer early by
	// the lateness it has measured (at most half the gap), and a request
	// it sends before its scheduled time is measured from when it was
	// sent. Zero means closed loop: Concurrency workers each send their
	// next request when the previous is answered.
	Rate float64
	// Concurrency is the number of closed-loop workers, or, in open loop,
	// the most requests outstanding at once: a request that would exceed it
	// is not sent and is counted as dropped (a client that cannot keep up
	// must say so, not slow down). Default 4 closed, 2000 open.
	Concurrency int
	// Seed makes the arrival times reproducible.
	Seed uint64
}

// ErrDropped marks a request the load generator did not send because too
// many were outstanding.
var ErrDropped = errors.New("lab: request dropped: too many outstanding")

// Outcome is what happened to one generated request.
type Outcome struct {
	// Scheduled is when the request was due, from the start of the run.
	Scheduled time.Duration
	// Latency is from the scheduled time (or the send, if that was
	// earlier) to the end of the answer.
	Latency time.Duration
	// Err is why the request failed, nil if it succeeded.
	Err error
}

// Generate offers load.Requests requests to do (called with the request's
// index, from many goroutines) and returns each request's outcome, by
// index. It stops early when ctx ends; requests not sent then carry ctx's
// error.
func Generate(ctx context.Context, load Load, do func(ctx context.Context, i int) error) []Outcome {
	out := make([]Outcome, load.Requests)
	if load.Rate <= 0 {
		generateClosed(ctx, load, do, out)
	} else {
		generateOpen(ctx, load, do, out)
	}
	return out
}

func generateClosed(ctx context.Context, load Load, do func(context.Context, int) error, out []Outcome) {
	workers := load.Concurrency
	if workers <= 0 {
		workers = 4
	}
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				t := time.Now()
				err := do(ctx, i)
				out[i] = Outcome{Scheduled: t.Sub(start), Latency: time.Since(t), Err: err}
			}
		})
	}
	i := 0
feed:
	for ; i < len(out); i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	for ; i < len(out); i++ {
		out[i].Err = ctx.Err()
	}
}

// pacer waits for scheduled send times. An idle Go process wakes from a
// timer up to a millisecond late (the runtime sleeps in whole
// milliseconds), which would be charged to every request; so the pacer
// arms each timer early by the lateness it has measured (an EWMA), at most
// half the gap from the previous send.
type pacer struct {
	lag time.Duration
}

// wait returns at due, or a little before, or when ctx ends, and returns
// the time to measure the request from: due, or the send if that is
// earlier.
func (p *pacer) wait(ctx context.Context, due time.Time, gap time.Duration) time.Time {
	if wait := time.Until(due) - min(p.lag, gap/2); wait > 0 {
		armed := time.Now().Add(wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			p.lag += (time.Since(armed) - p.lag) / 8
		case <-ctx.Done():
			t.Stop()
		}
	}
	if now := time.Now(); now.Before(due) {
		return now // sent early: measured from the send
	}
	return due
}

func generateOpen(ctx context.Context, load Load, do func(context.Context, int) error, out []Outcome) {
	limit := load.Concurrency
	if limit <= 0 {
		limit = 2000
	}
	rng := rand.New(rand.NewPCG(load.Seed, 0x6f70656e6c6f6f70))
	slots := make(chan struct{}, limit)
	var wg sync.WaitGroup
	start := time.Now()
	var at time.Duration
	var p pacer
	i := 0
	for ; i < len(out); i++ {
		// Exponential gaps: Poisson arrivals at the offered rate.
		gap := time.Duration(rng.ExpFloat64() / load.Rate * float64(time.Second))
		at += gap
		from := p.wait(ctx, start.Add(at), gap)
		if ctx.Err() != nil {
			break
		}
		out[i].Scheduled = at
		select {
		case slots <- struct{}{}:
		default:
			out[i].Err = ErrDropped
			continue
		}
		j := i // i outlives the loop: each goroutine needs its own copy
		wg.Go(func() {
			defer func() { <-slots }()
			err := do(ctx, j)
			out[j].Latency = time.Since(from)
			out[j].Err = err
		})
	}
	wg.Wait()
	for ; i < len(out); i++ {
		out[i].Err = ctx.Err()
	}
}

// Summary condenses outcomes: counts, throughput and latency percentiles,
// latency being measured from each request's scheduled time.
//
// The percentiles are over all requests, not over the successful ones only:
// a request that failed, timed out, was dropped or was never sent got no
// good answer, and counts as infinitely slow (+Inf). Otherwise failures
// would vanish from the tail, and a run whose slow reads time out would
// show a better p99 than one whose slow reads succeed. A percentile whose
// nearest rank falls on such a request is therefore +Inf: with 2 of 100
// requests failed, p99, p99.9 and the maximum are +Inf; with none
// succeeded, every percentile is. With no requests at all they are NaN.
//
// JSON writes an infinite or NaN percentile as null, never as a made-up
// number. It writes the percentiles as Summarize computed them: make a
// Summary with Summarize, as one whose percentiles were set by hand writes
// them as null.
type Summary struct {
	Requests  int `json:"requests"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Dropped   int `json:"dropped"`
	// summaryJSON is how JSON sees the percentiles below.
	summaryJSON
	P50Ms  float64 `json:"-"`
	P90Ms  float64 `json:"-"`
	P99Ms  float64 `json:"-"`
	P999Ms float64 `json:"-"`
	MaxMs  float64 `json:"-"`
	// GoodputPerSec is successful requests per second of the run.
	GoodputPerSec float64 `json:"goodputPerSec"`
	// FirstError is the first failure's message, empty if none failed.
	FirstError string `json:"firstError,omitempty"`
}

// summaryJSON holds Summary's percentiles as JSON writes them, under the
// names of the fields it mirrors (which hide its own). Summary cannot have
// a MarshalJSON method: reports embed Summary, and the method would be
// promoted to them and write the Summary in place of the whole report.
type summaryJSON struct {
	P50Ms  jsonMs `json:"p50Ms"`
	P90Ms  jsonMs `json:"p90Ms"`
	P99Ms  jsonMs `json:"p99Ms"`
	P999Ms jsonMs `json:"p999Ms"`
	MaxMs  jsonMs `json:"maxMs"`
}

// jsonMs is a latency in ms as JSON writes it: null when it was not set or
// is not finite.
type jsonMs struct {
	v   float64
	set bool
}

func msJSON(v float64) jsonMs { return jsonMs{v: v, set: true} }

// String writes m as JSON does, so that %v of a Summary stays readable.
func (m jsonMs) String() string {
	b, _ := m.MarshalJSON()
	return string(b)
}

// MarshalJSON implements json.Marshaler.
func (m jsonMs) MarshalJSON() ([]byte, error) {
	if !m.set || math.IsInf(m.v, 0) || math.IsNaN(m.v) {
		return []byte("null"), nil
	}
	return json.Marshal(m.v)
}

// Summarize computes a Summary; the run lasted elapsed.
func Summarize(outs []Outcome, elapsed time.Duration) Summary {
	s := Summary{Requests: len(outs)}
	// Every request has a latency here; those without a good answer +Inf.
	lat := make([]float64, 0, len(outs))
	for _, o := range outs {
		switch {
		case o.Err == nil:
			s.Succeeded++
			lat = append(lat, ms(o.Latency))
			continue
		case errors.Is(o.Err, ErrDropped):
			s.Dropped++
		default:
			s.Failed++
			if s.FirstError == "" {
				s.FirstError = o.Err.Error()
			}
		}
		lat = append(lat, math.Inf(1))
	}
	if len(lat) > 0 {
		sortFloats(lat)
		s.P50Ms, s.P90Ms, s.P99Ms = rankF(lat, 0.5), rankF(lat, 0.9), rankF(lat, 0.99)
		s.P999Ms, s.MaxMs = rankF(lat, 0.999), lat[len(lat)-1]
	} else {
		nan := math.NaN()
		s.P50Ms, s.P90Ms, s.P99Ms, s.P999Ms, s.MaxMs = nan, nan, nan, nan, nan
	}
	s.summaryJSON = summaryJSON{msJSON(s.P50Ms), msJSON(s.P90Ms), msJSON(s.P99Ms), msJSON(s.P999Ms), msJSON(s.MaxMs)}
	if elapsed > 0 {
		s.GoodputPerSec = math.Round(float64(s.Succeeded)/elapsed.Seconds()*10) / 10
	}
	return s
}

// LatenciesMs returns the latencies of the successful outcomes, in ms: the
// finite ones. A CDF of them must be drawn out of all len(outs) requests
// (report.CDFOutOf), so that it tops out at the share that succeeded rather
// than at 1, as failures would otherwise vanish from it.
func LatenciesMs(outs []Outcome) []float64 {
	lat := make([]float64, 0, len(outs))
	for _, o := range outs {
		if o.Err == nil {
			lat = append(lat, ms(o.Latency))
		}
	}
	return lat
}
