package replica

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	randv2 "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tailgate-dev/tailgate/internal/redact"
)

// ErrInvalid wraps every configuration error returned by New.
var ErrInvalid = errors.New("replica: invalid configuration")

// Defaults of a Config.
const (
	DefaultFailureThreshold = 5
	DefaultCooldown         = 5 * time.Second
	DefaultMaxCooldown      = 60 * time.Second
	DefaultDecayTime        = 10 * time.Second
)

// Config configures a Set. The zero Config is useful: a breaker that opens
// after 5 consecutive failures for 5s, doubling up to 60s while probes keep
// failing, and a peak-EWMA with a 10s time constant.
type Config struct {
	// FailureThreshold is how many consecutive failures open a replica's
	// breaker. Default 5; zero means the default, negative is an error.
	FailureThreshold int

	// Cooldown is how long an open breaker rejects requests before it admits
	// one half-open probe. Default 5s; zero means the default, negative is an
	// error.
	Cooldown time.Duration

	// MaxCooldown caps the cooldown, which doubles after each failed probe.
	// Default 60s (or Cooldown, if that is longer); zero means the default,
	// negative or shorter than Cooldown is an error.
	MaxCooldown time.Duration

	// DecayTime is the time constant of the peak-EWMA latency: a sample
	// DecayTime old weighs 1/e of a fresh one. Default 10s; zero means the
	// default, negative is an error.
	DecayTime time.Duration

	// Seed seeds the randomness of the power-of-two-choices pick. Zero means
	// a random seed; tests pass a seed to make picks reproducible.
	Seed uint64

	// Probation configures latency-induced probation. It is off unless
	// Probation.Enabled, because a replica on probation is judged from
	// shadow requests that the caller must send (Pick with Role Shadow).
	Probation Probation

	// OnChange, when non-nil, is told of each change of a replica's
	// breaker (opened, half-open, closed) and probation (entered,
	// exited), once, on the goroutine whose call made it (Done, a pick,
	// updateProbation, Next), after the Set's locks are released: it may
	// call the Set. It delays that call, a pick or an attempt's Done, so it
	// must be quick and must not block (a log line is fine). Nil: no
	// reports, and nothing is spent on them.
	OnChange func(Event)
}

// withDefaults returns c with zero fields replaced by defaults, or an error
// naming the first invalid field.
func (c Config) withDefaults() (Config, error) {
	if c.FailureThreshold < 0 {
		return c, fmt.Errorf("%w: failure threshold %d < 1", ErrInvalid, c.FailureThreshold)
	}
	if c.FailureThreshold == 0 {
		c.FailureThreshold = DefaultFailureThreshold
	}
	if c.Cooldown < 0 {
		return c, fmt.Errorf("%w: negative cooldown %v", ErrInvalid, c.Cooldown)
	}
	if c.Cooldown == 0 {
		c.Cooldown = DefaultCooldown
	}
	if c.MaxCooldown < 0 {
		return c, fmt.Errorf("%w: negative max cooldown %v", ErrInvalid, c.MaxCooldown)
	}
	if c.MaxCooldown == 0 {
		c.MaxCooldown = max(DefaultMaxCooldown, c.Cooldown)
	}
	if c.MaxCooldown < c.Cooldown {
		return c, fmt.Errorf("%w: max cooldown %v shorter than cooldown %v", ErrInvalid, c.MaxCooldown, c.Cooldown)
	}
	if c.DecayTime < 0 {
		return c, fmt.Errorf("%w: negative decay time %v", ErrInvalid, c.DecayTime)
	}
	if c.DecayTime == 0 {
		c.DecayTime = DefaultDecayTime
	}
	p, err := c.Probation.withDefaults()
	if err != nil {
		return c, err
	}
	c.Probation = p
	return c, nil
}

// Set is a set of equivalent replicas. It chooses where attempts go and
// keeps, per replica, a circuit breaker, a peak-EWMA latency, the number of
// attempts in flight, its probation (when enabled) and counters for an
// admin view. A Set is safe for concurrent use; its methods never read the
// clock but take the time from the caller.
//
// A Set's members are fixed: membership changes by making the Set's next
// generation (see Next), a new Set in which the replicas kept are the same
// replicas, their state shared. A caller holds one generation for the
// whole of a request, so that its picks and Done calls agree on what each
// index names, and swaps generations without a lock on its request path
// (an atomic pointer, say).
type Set struct {
	cfg  Config
	tau  float64 // DecayTime in nanoseconds
	gen  uint16  // the generation's number, wrapping: a ticket carries it
	lin  *lineage
	reps []*replica
}

// lineage is what the generations of a Set share: their clock, their
// random generator, the count of replicas on probation, the probation
// judge, and which generation is the newest.
type lineage struct {
	// epoch is the first time any method was given. Times are kept as
	// nanoseconds since epoch so that they fit in atomics, and measuring
	// them with time.Time.Sub keeps the monotonic clock reading: a step of
	// the wall clock cannot stretch or cut a cooldown. Shared, so that
	// the times a replica keeps mean the same in every generation.
	epoch atomic.Pointer[time.Time]

	// rng is the state of the generator of a seeded Set, written by every
	// pick: it has a cache line of its own.
	seeded bool
	_      [cacheLine]byte
	rng    atomic.Uint64
	_      [cacheLine - 8]byte

	// onProbation counts the newest generation's replicas on probation
	// (read by every pick, written only as one goes on or comes off); the
	// rest is the judge's, see probation.go.
	onProbation atomic.Int32
	_           [cacheLine - 4]byte
	prob        probationJudge

	// current is the newest generation: the one the judge judges, and
	// the only one Next accepts, so that membership changes in a line.
	current atomic.Pointer[Set]
	gens    uint16 // generations made, guarded by prob.mu
}

// cacheLine is the unit of memory that cores take turns owning.
const cacheLine = 64

// replica is the state of one replica, shared by every generation of a
// Set that has it, in three groups kept on cache lines of their own, by
// who writes them: a core that writes a line takes it from every other
// core's cache, and the next reader there waits for it. A fourth group,
// probation's, is written by Done under mu and by the judge.
//
// Replicas are allocated one by one, each padded to whole cache lines, so
// that generations can share them by pointer. A slice of values, as
// before generations, saved a pointer load per replica a pick looks at:
// the picks cost the same within the noise (see BenchmarkPickPrimaryDone).
type replica struct {
	pickFields
	_ [cacheLine - unsafe.Sizeof(pickFields{})%cacheLine]byte
	loadFields
	_ [cacheLine - unsafe.Sizeof(loadFields{})%cacheLine]byte
	doneFields
	_ [cacheLine - unsafe.Sizeof(doneFields{})%cacheLine]byte
	probFields
	_ [cacheLine - unsafe.Sizeof(probFields{})%cacheLine]byte
}

// pickFields are read by every pick for every replica and written only when
// the breaker changes state, so they stay in every core's cache.
type pickFields struct {
	name string
	// word is the breaker: generation<<genShift | probe bit | state.
	word atomic.Uint64
	// openUntil (ns since epoch) is when an open breaker admits a probe. It
	// is stored before the word moves to open, so a reader that sees open
	// sees its deadline or a later one.
	openUntil atomic.Int64
	// probation is set while the replica is on probation (written only by
	// the probation judge), and nextShadow (ns since epoch) is when its
	// next shadow request is due (written by a Shadow pick, at most
	// ShadowRate times a second).
	probation  atomic.Bool
	nextShadow atomic.Int64
}

// loadFields price the replica: read by picks that consider it, written by
// every pick and Done of it (picks and shadows are here because every pick
// writes this line anyway).
type loadFields struct {
	inflight atomic.Int64
	picks    atomic.Uint64
	shadows  atomic.Uint64 // shadow tickets handed out (a subset of picks)
	// ewma is the peak-EWMA latency in nanoseconds (float64 bits) as of
	// lastUpdate (ns since epoch). Written under mu.
	ewma       atomic.Uint64
	lastUpdate atomic.Int64
}

// doneFields are written by Done and read only by Snapshot. mu serialises
// Done's updates of the EWMA and the breaker, which move several fields
// together; picks never take it.
type doneFields struct {
	successes, failures, canceled, stale atomic.Uint64

	mu          sync.Mutex
	consecutive int           // consecutive current-generation failures; guarded by mu
	cooldown    time.Duration // the cooldown of the next opening; guarded by mu
}

// probFields are the replica's probation: its recent latency samples,
// guarded by mu (Done adds them while probation is on), and where the
// judge has it, guarded by the judge's mu.
type probFields struct {
	recent samples
	judged probState
}

// New returns a Set of the named replicas, in order: replica i is names[i].
// Names (base URLs in practice) must be non-empty and unique, and there must
// be at least one. Errors wrap ErrInvalid.
func New(names []string, cfg Config) (*Set, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkNames(names); err != nil {
		return nil, err
	}
	lin := &lineage{seeded: cfg.Seed != 0}
	lin.rng.Store(cfg.Seed)
	s := &Set{cfg: cfg, tau: float64(cfg.DecayTime), lin: lin, reps: make([]*replica, len(names))}
	for i, n := range names {
		s.reps[i] = newReplica(n, cfg)
	}
	lin.current.Store(s)
	lin.prob.configure(cfg.Probation, len(names))
	return s, nil
}

// checkNames checks the names of a Set's replicas.
func checkNames(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("%w: no replicas", ErrInvalid)
	}
	if len(names) > math.MaxUint32-1 {
		return fmt.Errorf("%w: %d replicas is too many", ErrInvalid, len(names))
	}
	seen := make(map[string]int, len(names))
	for i, n := range names {
		if n == "" {
			return fmt.Errorf("%w: replica %d has an empty name", ErrInvalid, i)
		}
		if j, dup := seen[n]; dup {
			return fmt.Errorf("%w: replicas %d and %d are both named %q", ErrInvalid, j, i, redact.URL(n))
		}
		seen[n] = i
	}
	return nil
}

// newReplica returns a cold replica: breaker closed, no latency sample.
func newReplica(name string, cfg Config) *replica {
	r := &replica{}
	r.name = name
	r.cooldown = cfg.Cooldown
	r.word.Store(pack(0, Closed, false))
	// No sample yet: the first one is taken as is whatever its age.
	r.lastUpdate.Store(math.MinInt64)
	return r
}

// Config returns the configuration in effect, defaults filled in.
func (s *Set) Config() Config { return s.cfg }

// Len returns the number of replicas.
func (s *Set) Len() int { return len(s.reps) }

// Name returns the name of replica i. It panics if i is out of range.
func (s *Set) Name(i int) string { return s.reps[i].name }

// Index returns the index of the replica with the given name.
func (s *Set) Index(name string) (int, bool) {
	for i, r := range s.reps {
		if r.name == name {
			return i, true
		}
	}
	return -1, false
}

// offset returns now as nanoseconds since the Set's epoch, fixing the epoch
// on first use (the only allocation outside Snapshot and Next, once per
// lineage).
func (s *Set) offset(now time.Time) int64 {
	e := s.lin.epoch.Load()
	if e == nil {
		t := now
		s.lin.epoch.CompareAndSwap(nil, &t)
		e = s.lin.epoch.Load()
	}
	return int64(now.Sub(*e))
}

// timeAt converts an offset back to a time.
func (s *Set) timeAt(off int64) time.Time {
	return s.lin.epoch.Load().Add(time.Duration(off))
}

// next returns 64 random bits. Without a seed they come from the runtime's
// generator, which keeps its state per thread: concurrent picks share
// nothing. A seeded Set runs splitmix64 over one atomic counter instead, so
// that a seed fixes the sequence of a single goroutine; picks on several
// cores then contend for the counter's cache line, which tests do not mind.
func (s *Set) next() uint64 {
	if !s.lin.seeded {
		return randv2.Uint64()
	}
	z := s.lin.rng.Add(0x9e3779b97f4a7c15)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a random int in [0, n), n > 0, by multiplying instead of
// dividing (Lemire); the bias, below n/2^64, is of no concern here.
func (s *Set) intn(n int) int {
	hi, _ := bits.Mul64(s.next(), uint64(n))
	return int(hi)
}

// satAdd returns a+b, saturating instead of wrapping (b >= 0).
func satAdd(a int64, b time.Duration) int64 {
	if a > math.MaxInt64-int64(b) {
		return math.MaxInt64
	}
	return a + int64(b)
}
