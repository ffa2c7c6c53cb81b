package fanout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// Errors a fan-out returns; the Result comes with them.
var (
	// ErrCanaryFailed means a canary shard failed, or did not answer within
	// CanaryTimeout (or before the Deadline): the request was not sent to
	// the other shards, so a query that crashes or stalls servers reaches
	// only the canaries. The Result says which canaries answered and why
	// the others failed.
	ErrCanaryFailed = errors.New("fanout: canary failed; not fanned out")
	// ErrInsufficient means so many shards failed that the completion
	// policy could no longer be met.
	ErrInsufficient = errors.New("fanout: too many shards failed")
)

// ErrDeadline is the cause (see context.Cause) with which the shards'
// context ends when Completion.Deadline passes. Do itself then returns a
// partial result and no error; the sentinel lets a Call tell the fan-out's
// deadline from its caller's.
var ErrDeadline = errors.New("fanout: completion deadline passed")

// Completion says when a fan-out is done.
type Completion struct {
	// Need is how many shards must answer: 0 means all of them.
	Need int
	// Fraction, when Need is 0 and Fraction is in (0, 1], sets Need to
	// ceil(Fraction × shards), and to at least 1: 0.95 waits for 95% of
	// the shards.
	Fraction float64
	// Deadline, when positive, ends the fan-out after that long with what
	// has arrived, even if fewer than Need shards have answered: the
	// result is then partial (and says which shards are missing), and the
	// error nil. The shards' context carries the deadline (its cause is
	// ErrDeadline), so the hedging engine does not launch a hedge that has
	// less time left than an attempt is expected to take.
	Deadline time.Duration
}

// Config configures a Fanout. Shards is required.
type Config struct {
	// Shards is the number of shards a request goes to.
	Shards int
	// Replicas is the number of interchangeable replicas of each shard, so
	// a hedge can go to a different one. Default 1 (hedges go to the same
	// address, as behind a load balancer).
	//
	// Every shard of one request sends its primary to the same replica,
	// r = i mod Replicas for the Fanout's i-th request (counting from 0),
	// and its hedges to r+1, r+2, ... (mod Replicas): with 2 replicas,
	// requests alternate between replica 0 and replica 1. The choice
	// depends only on the order of the Do calls, never on scheduling, so
	// runs are reproducible; and in a layout where each server holds
	// replica 0 of one shard and replica 1 of another (shard s on servers
	// s and s+N/2 of N, say), every server gets exactly one primary per
	// request.
	Replicas int
	// Completion says when a request is done. The zero value waits for
	// every shard.
	Completion Completion
	// Canaries is how many shards get the request first (at most 2); the
	// rest get it only once every canary has answered acceptably within
	// CanaryTimeout. If any canary fails or is late, Do returns
	// ErrCanaryFailed and no other shard is asked; if the canaries'
	// answers already meet Need, no other shard is asked either. The
	// canaries move round the shards from one request to the next. Zero
	// sends to every shard at once.
	Canaries int
	// CanaryTimeout bounds the wait for a canary's answer. Default 1s.
	CanaryTimeout time.Duration
	// Policy is the hedging policy of each shard's request. All the shards
	// share one Hedger, hence one budget: a fan-out to 100 shards earns
	// 100 × fraction of a credit and may spend at most that plus one
	// burst, never 100 bursts. Nil Budget means the default one.
	Policy hedge.Policy
}

// Fanout scatters requests over shards and gathers the answers. It is safe
// for concurrent use.
type Fanout struct {
	cfg      Config
	need     int
	hedger   *hedge.Hedger
	names    [][]string // per shard, its replicas' names for receipts
	nextSeed atomic.Uint64
}

// New validates cfg and returns a Fanout.
func New(cfg Config) (*Fanout, error) {
	if cfg.Shards < 1 {
		return nil, fmt.Errorf("%w: shards %d must be at least 1", ErrInvalid, cfg.Shards)
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Replicas < 1 {
		return nil, fmt.Errorf("%w: replicas %d must be at least 1", ErrInvalid, cfg.Replicas)
	}
	need := cfg.Completion.Need
	switch c := cfg.Completion; {
	case c.Need < 0 || c.Need > cfg.Shards:
		return nil, fmt.Errorf("%w: need %d of %d shards", ErrInvalid, c.Need, cfg.Shards)
	case c.Need == 0 && c.Fraction != 0:
		if math.IsNaN(c.Fraction) || c.Fraction <= 0 || c.Fraction > 1 {
			return nil, fmt.Errorf("%w: fraction %v must be within (0, 1]", ErrInvalid, c.Fraction)
		}
		// The 1e-9 forgives rounding (0.95 × 60 is 57.000000000000007);
		// a tiny fraction still waits for one shard, never for none.
		need = max(1, int(math.Ceil(c.Fraction*float64(cfg.Shards)-1e-9)))
	case c.Need == 0:
		need = cfg.Shards
	}
	if cfg.Completion.Deadline < 0 {
		return nil, fmt.Errorf("%w: negative deadline %v", ErrInvalid, cfg.Completion.Deadline)
	}
	if cfg.Canaries < 0 || cfg.Canaries > 2 || cfg.Canaries > cfg.Shards {
		return nil, fmt.Errorf("%w: canaries %d must be 0, 1 or 2 (and no more than the shards)", ErrInvalid, cfg.Canaries)
	}
	if cfg.CanaryTimeout == 0 {
		cfg.CanaryTimeout = time.Second
	}
	if cfg.CanaryTimeout < 0 {
		return nil, fmt.Errorf("%w: negative canary timeout %v", ErrInvalid, cfg.CanaryTimeout)
	}
	h, err := hedge.New(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	f := &Fanout{cfg: cfg, need: need, hedger: h}
	for s := range cfg.Shards {
		var names []string
		for r := range cfg.Replicas {
			names = append(names, "shard-"+strconv.Itoa(s)+"/replica-"+strconv.Itoa(r))
		}
		f.names = append(f.names, names)
	}
	return f, nil
}

// Need is how many shards a request waits for.
func (f *Fanout) Need() int { return f.need }

// Hedger is the hedging engine the shards share.
func (f *Fanout) Hedger() *hedge.Hedger { return f.hedger }

// Call performs one attempt of one shard's request. a.Target is the
// replica of the shard to use (in [0, Replicas)). It must honour ctx.
type Call[T any] func(ctx context.Context, shard int, a hedge.Attempt) (T, error)

// Result is what a fan-out gathered. It is returned with every outcome,
// errors included, so that a caller can always tell what it is holding.
type Result[T any] struct {
	// Values holds each shard's answer, by shard; the zero value where the
	// shard did not answer.
	Values []T
	// Answered reports, by shard, whether it answered.
	Answered []bool
	// Errors holds, by shard, why it failed; nil for shards that answered
	// or that were not waited for.
	Errors []error
	// Missing lists the shards without an answer, in order.
	Missing []int
	// Partial is true when fewer than all the shards answered: a
	// good-enough or deadline result, never silently.
	Partial bool
	// Need is how many answers the request waited for.
	Need int
	// Canaries lists the shards that got the request first.
	Canaries []int
	// Elapsed is how long the fan-out took.
	Elapsed time.Duration
}

type shardResult[T any] struct {
	shard int
	v     T
	err   error
}

// Do sends a request to every shard through the hedging engine (each shard
// hedged on its own, all drawing on one budget) and gathers the answers:
// it returns as soon as Need shards have answered, when failures make Need
// unreachable (ErrInsufficient), when the Deadline passes (a partial
// result, no error), or when ctx ends. Shards still running are cancelled.
// With canaries, the other shards get the request only after every canary
// has answered in time (ErrCanaryFailed otherwise).
func Do[T any](ctx context.Context, f *Fanout, call Call[T]) (*Result[T], error) {
	n := f.cfg.Shards
	start := time.Now()
	// One number per request, taken here rather than in the shards'
	// goroutines, so that the replica choice does not depend on scheduling:
	// every shard's primary goes to replica seq mod Replicas.
	seq := f.nextSeed.Add(1) - 1
	replicas := uint64(f.cfg.Replicas)
	primary := int(seq % replicas)
	res := &Result[T]{Values: make([]T, n), Answered: make([]bool, n), Errors: make([]error, n), Need: f.need}
	parent := ctx
	var cancel context.CancelFunc
	if d := f.cfg.Completion.Deadline; d > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, d, ErrDeadline)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	results := make(chan shardResult[T], n) // never blocks a shard
	launch := func(s int) {
		go func() {
			v, err := hedge.Do(ctx, f.hedger, hedge.Op[T]{
				Targets: f.names[s],
				First:   primary,
				Call:    func(ctx context.Context, a hedge.Attempt) (T, error) { return call(ctx, s, a) },
			})
			results <- shardResult[T]{s, v, err}
		}()
	}
	answered, failed := 0, 0
	finish := func(err error) (*Result[T], error) {
		res.Elapsed = time.Since(start)
		for s := range n {
			if !res.Answered[s] {
				res.Missing = append(res.Missing, s)
			}
		}
		res.Partial = len(res.Missing) > 0
		return res, err
	}
	take := func(r shardResult[T]) {
		if r.err != nil {
			res.Errors[r.shard] = r.err
			failed++
			return
		}
		res.Values[r.shard], res.Answered[r.shard] = r.v, true
		answered++
	}
	// ownDeadline reports whether ctx ended because the Deadline passed
	// rather than because the caller's context ended.
	ownDeadline := func() bool {
		return parent.Err() == nil && errors.Is(context.Cause(ctx), ErrDeadline)
	}
	// A shard that fails once ctx has ended was cut off, not broken: its
	// error is the fan-out's own doing and is not recorded.
	cutOff := func(r shardResult[T]) bool { return r.err != nil && ctx.Err() != nil }

	pending := make([]int, 0, n)
	if c := f.cfg.Canaries; c > 0 {
		// The canaries go round every (shard, replica) pair in turn.
		first := int(seq / replicas % uint64(n))
		for i := range c {
			s := (first + i) % n
			res.Canaries = append(res.Canaries, s)
			launch(s)
		}
		canaryTimer := time.NewTimer(f.cfg.CanaryTimeout)
		defer canaryTimer.Stop()
		for answered < c {
			select {
			case r := <-results:
				if cutOff(r) {
					continue // ctx.Done is ready too
				}
				take(r)
				if r.err != nil {
					return finish(fmt.Errorf("%w: shard %d: %w", ErrCanaryFailed, r.shard, r.err))
				}
				if answered >= f.need {
					// The canaries were enough (Need 1, say): nobody else
					// is asked.
					return finish(nil)
				}
			case <-canaryTimer.C:
				late := fmt.Errorf("fanout: canary gave no answer within %v", f.cfg.CanaryTimeout)
				for _, s := range res.Canaries {
					if !res.Answered[s] {
						res.Errors[s] = late
					}
				}
				return finish(fmt.Errorf("%w: no answer within %v", ErrCanaryFailed, f.cfg.CanaryTimeout))
			case <-ctx.Done():
				if ownDeadline() {
					return finish(fmt.Errorf("%w: the deadline passed first", ErrCanaryFailed))
				}
				return finish(fmt.Errorf("fanout: %w", context.Cause(ctx)))
			}
		}
		for i := c; i < n; i++ {
			pending = append(pending, (first+i)%n)
		}
	} else {
		for s := range n {
			pending = append(pending, s)
		}
	}
	for _, s := range pending {
		launch(s)
	}
	for answered < f.need {
		if n-failed < f.need {
			return finish(fmt.Errorf("%w: %d of %d failed, %d needed", ErrInsufficient, failed, n, f.need))
		}
		select {
		case r := <-results:
			if !cutOff(r) {
				take(r)
			}
		case <-ctx.Done():
			if !ownDeadline() {
				return finish(fmt.Errorf("fanout: %w", context.Cause(ctx)))
			}
			// Keep the answers that arrived with the deadline.
			for {
				select {
				case r := <-results:
					if r.err == nil {
						take(r)
					}
					continue
				default:
				}
				break
			}
			return finish(nil)
		}
	}
	return finish(nil)
}
