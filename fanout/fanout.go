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
	// ErrCanaryFailed means no canary shard answered in time: the request
	// was not sent to the other shards, so a query that crashes or stalls
	// servers reaches only the canaries.
	ErrCanaryFailed = errors.New("fanout: canary failed; not fanned out")
	// ErrInsufficient means so many shards failed that the completion
	// policy could no longer be met.
	ErrInsufficient = errors.New("fanout: too many shards failed")
)

// Completion says when a fan-out is done.
type Completion struct {
	// Need is how many shards must answer: 0 means all of them.
	Need int
	// Fraction, when Need is 0 and Fraction is in (0, 1], sets Need to
	// ceil(Fraction × shards): 0.95 waits for 95% of the shards.
	Fraction float64
	// Deadline, when positive, ends the fan-out after that long with what
	// has arrived, even if fewer than Need shards have answered: the
	// result is then partial (and says which shards are missing).
	Deadline time.Duration
}

// Config configures a Fanout. Shards is required.
type Config struct {
	// Shards is the number of shards a request goes to.
	Shards int
	// Replicas is the number of interchangeable replicas of each shard, so
	// a hedge can go to a different one. Default 1 (hedges go to the same
	// address, as behind a load balancer).
	Replicas int
	// Completion says when a request is done. The zero value waits for
	// every shard.
	Completion Completion
	// Canaries is how many shards get the request first (at most 2); the
	// rest get it only once a canary has answered acceptably within
	// CanaryTimeout. Zero sends to every shard at once.
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
		need = int(math.Ceil(c.Fraction*float64(cfg.Shards) - 1e-9))
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
// With canaries, the other shards get the request only after a canary has
// answered (ErrCanaryFailed otherwise).
func Do[T any](ctx context.Context, f *Fanout, call Call[T]) (*Result[T], error) {
	n := f.cfg.Shards
	start := time.Now()
	res := &Result[T]{Values: make([]T, n), Answered: make([]bool, n), Errors: make([]error, n), Need: f.need}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var deadline <-chan time.Time
	if d := f.cfg.Completion.Deadline; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	results := make(chan shardResult[T], n) // never blocks a shard
	launch := func(s int) {
		go func() {
			v, err := hedge.Do(ctx, f.hedger, hedge.Op[T]{
				Targets: f.names[s],
				First:   int(f.nextSeed.Add(1)), // spread primaries over replicas
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

	pending := make([]int, 0, n)
	if c := f.cfg.Canaries; c > 0 {
		first := int(f.nextSeed.Add(1) % uint64(n))
		for i := range c {
			s := (first + i) % n
			res.Canaries = append(res.Canaries, s)
			launch(s)
		}
		canaryTimer := time.NewTimer(f.cfg.CanaryTimeout)
		defer canaryTimer.Stop()
	canary:
		for answered == 0 {
			select {
			case r := <-results:
				take(r)
				if failed == c {
					return finish(fmt.Errorf("%w: %w", ErrCanaryFailed, r.err))
				}
			case <-canaryTimer.C:
				return finish(fmt.Errorf("%w: no answer within %v", ErrCanaryFailed, f.cfg.CanaryTimeout))
			case <-deadline:
				return finish(fmt.Errorf("%w: the deadline passed first", ErrCanaryFailed))
			case <-ctx.Done():
				return finish(fmt.Errorf("fanout: %w", context.Cause(ctx)))
			}
			if answered > 0 {
				break canary
			}
		}
		if answered >= f.need {
			// The canaries were enough (Need 1, say): nobody else is asked.
			return finish(nil)
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
			take(r)
		case <-deadline:
			return finish(nil)
		case <-ctx.Done():
			return finish(fmt.Errorf("fanout: %w", context.Cause(ctx)))
		}
	}
	return finish(nil)
}
