package replica

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a Probation.
const (
	DefaultProbationFactor     = 3.0
	DefaultProbationWindow     = 5 * time.Second
	DefaultProbationMinSamples = 5
	DefaultProbationMaxShare   = 0.1
	DefaultShadowRate          = 1.0
	// DefaultProbationMinExcess is the least a median must exceed its
	// peers' by to diverge, ratio aside: 2ms, about four network delays
	// inside a data centre, and above the scheduling and GC pauses of a
	// healthy server. A smaller gap is not what probation is for: it
	// costs a client little, and no hedge could win it back (hedge delays
	// are rarely below a few milliseconds). It keeps a healthy replica at
	// 1.4ms from going on probation because its peers answer in 0.44ms
	// (over 3x).
	DefaultProbationMinExcess = 2 * time.Millisecond
)

// MaxProbationSamples is how many recent latency samples each replica keeps
// for probation, and so the largest Probation.MinSamples.
const MaxProbationSamples = 64

// Probation configures latency-induced probation: a replica whose median
// latency stays well above its peers' is taken out of the rotation and
// measured with shadow requests until it recovers. The zero Probation is
// off; with Enabled alone it takes the defaults below.
type Probation struct {
	// Enabled turns probation on. The caller then sends the shadow
	// requests that Pick hands out for Role Shadow: a replica on probation is judged
	// from nothing else, so without them it would never come back.
	Enabled bool

	// Factor is how many times its peers' median latency a replica's
	// median must exceed, for Window, to go on probation (and by
	// MinExcess at least). Default 3; zero means the default; otherwise it
	// must be above 1.
	Factor float64

	// MinExcess is how much, at least, a replica's median must exceed its
	// peers' to diverge, as well as Factor times it: the ratio alone
	// would send a replica at 1.4ms on probation for peers at 0.44ms.
	// Default DefaultProbationMinExcess (2ms); zero means the default;
	// negative means no floor (the ratio alone). Its exit counterpart,
	// like ExitFactor's, is lower: a replica on probation comes back once
	// its median exceeds its peers' by less than MinExcess × (ExitFactor
	// - 1) / (Factor - 1) (1ms with the defaults), or by less than
	// ExitFactor times.
	MinExcess time.Duration

	// ExitFactor is the ratio below which a replica on probation must stay,
	// for Window, to come back: lower than Factor, so that a replica near
	// the line does not flap. Default 2/3 of Factor but at least 1 (2 with
	// the default Factor); zero means the default; otherwise it must be
	// within [1, Factor].
	ExitFactor float64

	// Window is how long a divergence (or a recovery) must last before the
	// replica goes on (or comes off) probation, and how far back the
	// samples that judge a serving replica go. Default 5s; zero means the
	// default, negative is an error.
	Window time.Duration

	// MinSamples is the fewest latency samples in a replica's window for
	// its median to count, for the replica itself as for its peers. Default
	// 5; zero means the default; at most MaxProbationSamples.
	MinSamples int

	// MaxShare caps the share of replicas on probation at once. The cap is
	// floor(MaxShare × replicas), but at least 1 (as Envoy ejects one host
	// whatever its max_ejection_percent) and at most replicas - 1, so one
	// replica always serves: with the default 10%, one replica of 2 to 19,
	// two of 20 to 29, and none when there is only one. Default 0.1; zero
	// means the default; otherwise within (0, 1].
	MaxShare float64

	// ShadowRate is how many shadow requests per second, at most, each
	// replica on probation is due (Shadow picks space them at least
	// 1/ShadowRate apart). A replica on probation is judged from the
	// samples taken since it went on probation, over the last
	// max(Window, 2 × MinSamples / ShadowRate), so that enough shadows fit.
	// Default 1; zero means the default; negative is an error.
	ShadowRate float64
}

// withDefaults returns p with zero fields replaced by defaults, or an error
// naming the first invalid field.
func (p Probation) withDefaults() (Probation, error) {
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case !finite(p.Factor) || p.Factor < 0 || p.Factor > 0 && p.Factor <= 1:
		return p, fmt.Errorf("%w: probation factor %v must be above 1", ErrInvalid, p.Factor)
	case p.Factor == 0:
		p.Factor = DefaultProbationFactor
	}
	switch {
	case !finite(p.ExitFactor) || p.ExitFactor < 0:
		return p, fmt.Errorf("%w: probation exit factor %v must be within [1, factor]", ErrInvalid, p.ExitFactor)
	case p.ExitFactor == 0:
		p.ExitFactor = max(1, p.Factor*2/3)
	case p.ExitFactor < 1 || p.ExitFactor > p.Factor:
		return p, fmt.Errorf("%w: probation exit factor %v must be within [1, factor %v]", ErrInvalid, p.ExitFactor, p.Factor)
	}
	if p.MinExcess == 0 {
		p.MinExcess = DefaultProbationMinExcess
	}
	switch {
	case p.Window < 0:
		return p, fmt.Errorf("%w: negative probation window %v", ErrInvalid, p.Window)
	case p.Window == 0:
		p.Window = DefaultProbationWindow
	}
	switch {
	case p.MinSamples < 0 || p.MinSamples > MaxProbationSamples:
		return p, fmt.Errorf("%w: probation min samples %d must be within [1, %d]", ErrInvalid, p.MinSamples, MaxProbationSamples)
	case p.MinSamples == 0:
		p.MinSamples = DefaultProbationMinSamples
	}
	switch {
	case !finite(p.MaxShare) || p.MaxShare < 0 || p.MaxShare > 1:
		return p, fmt.Errorf("%w: probation max share %v must be within (0, 1]", ErrInvalid, p.MaxShare)
	case p.MaxShare == 0:
		p.MaxShare = DefaultProbationMaxShare
	}
	switch {
	case !finite(p.ShadowRate) || p.ShadowRate < 0:
		return p, fmt.Errorf("%w: shadow rate %v must be positive", ErrInvalid, p.ShadowRate)
	case p.ShadowRate == 0:
		p.ShadowRate = DefaultShadowRate
	}
	return p, nil
}

// MaxOnProbation returns how many of n replicas may be on probation at once
// with this MaxShare (see MaxShare): floor(MaxShare × n), at least 1 and at
// most n - 1.
func (p Probation) MaxOnProbation(n int) int {
	if n < 2 {
		return 0
	}
	share := p.MaxShare
	if share == 0 {
		share = DefaultProbationMaxShare
	}
	// The epsilon keeps 0.3 × 10 from flooring to 2.
	c := int(math.Floor(share*float64(n) + 1e-9))
	return min(max(c, 1), n-1)
}

// excess returns the floors of a median's excess over its peers', in ns:
// to diverge (enter) and to stay on probation (exit), zero when there is
// none. The exit floor is to the entry floor as the exit ratio's excess is
// to the entry ratio's: (ExitFactor - 1) / (Factor - 1).
func (p Probation) excess() (enter, exit float64) {
	if p.MinExcess <= 0 {
		return 0, 0
	}
	enter = float64(p.MinExcess)
	return enter, enter * (p.ExitFactor - 1) / (p.Factor - 1)
}

// recoverySpan returns how far back the samples that judge a replica on
// probation go: Window, or longer when ShadowRate would not fit twice
// MinSamples shadows in it.
func (p Probation) recoverySpan() time.Duration {
	need := time.Duration(2 * float64(p.MinSamples) / p.ShadowRate * float64(time.Second))
	if need < 0 || need > 100*365*24*time.Hour { // overflow or absurd: cap it
		need = 100 * 365 * 24 * time.Hour
	}
	return max(p.Window, need)
}

// samples is a ring of a replica's recent latency samples, guarded by the
// replica's mu.
type samples struct {
	at [MaxProbationSamples]int64 // when taken, ns since epoch
	ns [MaxProbationSamples]int64 // latency
	n  uint64                     // samples ever added
}

func (s *samples) add(at, ns int64) {
	k := s.n % MaxProbationSamples
	s.at[k], s.ns[k] = at, ns
	s.n++
}

// since copies into buf the latencies of the samples taken after from and
// returns how many.
func (s *samples) since(from int64, buf *[MaxProbationSamples]int64) int {
	k := 0
	for j := range min(s.n, MaxProbationSamples) {
		if s.at[j] > from {
			buf[k] = s.ns[j]
			k++
		}
	}
	return k
}

// probState is the judge's view of one replica, guarded by the judge's mu.
type probState struct {
	status ProbationStatus
	since  int64 // see ProbationState.Since; valid when status != Serving or exits > 0
	// hold is when the current divergence (Diverging) or recovery
	// (Recovering) began to hold.
	hold   int64
	capped bool // diverged for Window, but the cap held it back
	// The last judgement: median, peers' median (0: none), samples.
	p50, peers float64
	n          int
	// The judgement that moved the replica last, for its Reason.
	moveP50, movePeers float64
	moveHeld           int64
	entries, exits     uint64
}

// probationJudge decides which replicas are on probation, those of the
// newest generation of a Set (see Next). It runs at most every Window/10,
// from Done (or updateProbation), under mu.
type probationJudge struct {
	// Read without mu, on the request path; written under mu (by
	// configure) and, for next, by whoever claims a judgement.
	next        atomic.Int64 // when the next judgement is due, ns since epoch; MaxInt64 while off
	every       atomic.Int64 // ns between judgements
	shadowEvery atomic.Int64 // ns between shadows to one replica

	mu     sync.Mutex
	cfg    Probation
	window int64 // ns
	span   int64 // recoverySpan, ns
	maxOn  int
	// A median's excess over its peers' (ns) must be above enterExcess to
	// diverge, and below exitExcess (or under the exit ratio) to recover.
	enterExcess, exitExcess float64
	last                    int64     // when it last judged
	sort                    []float64 // scratch: serving replicas' medians
}

// configure sets the judge up for p and n replicas (the newest
// generation's), with mu held. Turned on, it starts afresh; judged again
// with other settings, replicas keep where they stand, and the settings
// apply from the next judgement.
func (j *probationJudge) configure(p Probation, n int) {
	was := j.cfg.Enabled
	j.cfg = p
	j.maxOn = p.MaxOnProbation(n)
	if cap(j.sort) < n {
		j.sort = make([]float64, 0, n)
	}
	if !p.Enabled {
		j.next.Store(math.MaxInt64)
		return
	}
	j.window = int64(p.Window)
	j.span = int64(p.recoverySpan())
	j.every.Store(max(j.window/10, int64(time.Millisecond)))
	j.enterExcess, j.exitExcess = p.excess()
	j.shadowEvery.Store(max(int64(float64(time.Second)/p.ShadowRate), 1))
	if !was {
		j.last = math.MinInt64
		j.next.Store(math.MinInt64)
	}
}

// maybeJudge judges at off if a judgement is due and no other is running.
func (j *probationJudge) maybeJudge(lin *lineage, off int64) {
	next := j.next.Load()
	if off < next || !j.next.CompareAndSwap(next, off+j.every.Load()) {
		return
	}
	if j.mu.TryLock() {
		judged, moves := j.judge(lin, off)
		j.mu.Unlock()
		judged.report(moves)
	}
}

// report hands the moves of a judgement of s to its OnChange, outside the
// judge's lock. s may be nil when there are none.
func (s *Set) report(moves []Event) {
	for _, e := range moves {
		s.changed(e)
	}
}

// updateProbation judges every replica's latency at now and moves replicas
// on and off probation. Done does this by itself at most every Window/10,
// so callers need not; it is there for a caller that wants a judgement at
// a given time (tests, an admin view after traffic stopped). It does
// nothing when probation is off. Whichever generation it is called on,
// the newest is judged.
func (s *Set) updateProbation(now time.Time) {
	if !s.cfg.Probation.Enabled {
		return
	}
	off := s.offset(now)
	j := &s.lin.prob
	j.mu.Lock()
	judged, moves := j.judge(s.lin, off)
	j.mu.Unlock()
	judged.report(moves)
}

// OnProbation returns how many replicas of the newest generation are on
// probation now.
func (s *Set) OnProbation() int { return int(s.lin.onProbation.Load()) }

// judge is one judgement at off, with j.mu held, of the newest generation,
// which it returns with the moves on and off probation, for that
// generation's OnChange (nil without one, or without moves).
//
// Each replica's median comes from its samples of the last Window or, on
// probation, from those taken since it went on, over the last recovery
// span. Its peers' median is the median of the medians of the serving
// replicas other than itself with at least MinSamples samples. A serving
// replica diverges while its median is above Factor × its peers' and more
// than MinExcess above theirs; after Window of that it goes on probation,
// worst ratio first, while the cap allows. A replica on probation recovers
// while its median is below ExitFactor × its peers', or less than its exit
// excess above theirs (see Probation.MinExcess); after Window of that it
// comes back. Without
// enough samples, or without peers to compare with, nothing holds: a
// divergence or recovery in progress starts over.
func (j *probationJudge) judge(lin *lineage, off int64) (judged *Set, moves []Event) {
	if off < j.last || !j.cfg.Enabled {
		return nil, nil // a judgement of a later time has been made, or probation is off
	}
	j.last = off
	f := j.cfg
	judged = lin.current.Load()
	reps := judged.reps
	report := judged.cfg.OnChange != nil
	window := time.Duration(j.window)
	var buf [MaxProbationSamples]int64
	for _, r := range reps {
		p := &r.judged
		from := off - j.window
		if p.status.OnProbation() {
			from = max(off-j.span, p.since-1)
		}
		r.mu.Lock()
		k := r.recent.since(from, &buf)
		r.mu.Unlock()
		p.n, p.p50 = k, median(buf[:k])
	}
	j.sort = j.sort[:0]
	for _, r := range reps {
		if p := &r.judged; !p.status.OnProbation() && p.n >= f.MinSamples {
			j.sort = append(j.sort, p.p50)
		}
	}
	slices.Sort(j.sort)

	// Recoveries first: they free room under the cap.
	for i, r := range reps {
		p := &r.judged
		if !p.status.OnProbation() {
			continue
		}
		p.peers = peersMedian(j.sort, -1)
		if p.n < f.MinSamples || len(j.sort) == 0 || p.p50 >= f.ExitFactor*p.peers && p.p50-p.peers >= j.exitExcess {
			p.status, p.hold = OnProbation, 0
			continue
		}
		if p.status != Recovering {
			p.status, p.hold = Recovering, off
		}
		if off-p.hold >= j.window {
			p.moveP50, p.movePeers, p.moveHeld = p.p50, p.peers, off-p.hold
			p.status, p.since, p.hold = Serving, off, 0
			p.exits++
			r.probation.Store(false)
			lin.onProbation.Add(-1)
			if report {
				moves = append(moves, Event{Kind: ProbationExited, Replica: i, Name: r.name, Reason: reason(p, off, 0, j.maxOn, window)})
			}
		}
	}
	// Divergences.
	ready := 0
	for _, r := range reps {
		p := &r.judged
		if p.status.OnProbation() || p.status == Serving && p.exits > 0 && p.since == off {
			continue // on probation, or just came off: judged from shadows, not among j.sort
		}
		p.capped = false
		if p.n < f.MinSamples {
			p.peers = peersMedian(j.sort, -1)
		} else {
			// Its own median is among the sorted ones: leave it out.
			self, _ := slices.BinarySearch(j.sort, p.p50)
			p.peers = peersMedian(j.sort, self)
		}
		if p.n < f.MinSamples || len(j.sort) < 2 || p.p50 <= f.Factor*p.peers || p.p50-p.peers <= j.enterExcess {
			if p.status == Diverging {
				p.status, p.hold = Serving, 0
			}
			continue
		}
		if p.status != Diverging {
			p.status, p.hold = Diverging, off
		}
		if off-p.hold >= j.window {
			ready++
		}
	}
	// Those that diverged for Window go on probation, the worst first,
	// while the cap allows; the others wait, capped.
	for ; ready > 0; ready-- {
		var worst *replica
		wi, ratio := -1, 0.0
		for i, r := range reps {
			p := &r.judged
			if p.status != Diverging || p.capped || off-p.hold < j.window {
				continue
			}
			if x := ratioOf(p.p50, p.peers); worst == nil || x > ratio {
				worst, wi, ratio = r, i, x
			}
		}
		p := &worst.judged
		if int(lin.onProbation.Load()) >= j.maxOn {
			p.capped = true
			continue
		}
		p.moveP50, p.movePeers, p.moveHeld = p.p50, p.peers, off-p.hold
		p.status, p.since, p.hold = OnProbation, off, 0
		p.entries++
		worst.nextShadow.Store(off) // the first shadow is due at once
		worst.probation.Store(true)
		lin.onProbation.Add(1)
		if report {
			moves = append(moves, Event{Kind: ProbationEntered, Replica: wi, Name: worst.name, Reason: reason(p, off, 0, j.maxOn, window)})
		}
	}
	return judged, moves
}

// median returns the median of v (sorted in place), 0 for none.
func median(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	m := len(v) / 2
	if len(v)%2 == 1 {
		return float64(v[m])
	}
	return (float64(v[m-1]) + float64(v[m])) / 2
}

// peersMedian returns the median of sorted without its element at skip
// (-1: none), 0 when nothing is left.
func peersMedian(sorted []float64, skip int) float64 {
	n := len(sorted)
	if skip >= 0 {
		n--
	}
	if n <= 0 {
		return 0
	}
	at := func(k int) float64 {
		if skip >= 0 && k >= skip {
			k++
		}
		return sorted[k]
	}
	if n%2 == 1 {
		return at(n / 2)
	}
	return (at(n/2-1) + at(n/2)) / 2
}

func ratioOf(p50, peers float64) float64 {
	if peers <= 0 {
		return math.Inf(1)
	}
	return p50 / peers
}

// pickShadow is Pick for a Shadow.
func (s *Set) pickShadow(now time.Time) (i int, t Ticket, ok bool) {
	if s.lin.onProbation.Load() == 0 {
		return -1, Ticket{}, false
	}
	off := s.offset(now)
	every := s.lin.prob.shadowEvery.Load()
	for j, r := range s.reps {
		if !r.probation.Load() {
			continue
		}
		next := r.nextShadow.Load()
		if off < next || !r.nextShadow.CompareAndSwap(next, off+every) {
			continue
		}
		if t, ok := s.admit(j, off); ok {
			t.id |= ticketShadow
			r.shadows.Add(1)
			return j, t, true
		}
	}
	return -1, Ticket{}, false
}
