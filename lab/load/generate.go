package load

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// Config describes how requests are offered to a system under test.
type Config struct {
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
func Generate(ctx context.Context, load Config, do func(ctx context.Context, i int) error) []Outcome {
	out := make([]Outcome, load.Requests)
	if load.Rate <= 0 {
		generateClosed(ctx, load, do, out)
	} else {
		generateOpen(ctx, load, do, out)
	}
	return out
}

func generateClosed(ctx context.Context, load Config, do func(context.Context, int) error, out []Outcome) {
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

func generateOpen(ctx context.Context, load Config, do func(context.Context, int) error, out []Outcome) {
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
