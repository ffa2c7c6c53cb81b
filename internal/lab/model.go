package lab

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Request is what a model knows about the request it prices.
type Request struct {
	ID    uint64        // the "id" query parameter (0 if absent or not a number)
	Hedge bool          // the request carries the Tailgate-Hedge header
	At    time.Duration // arrival, since the fixture started
}

// Model draws the service time of one request. Implementations must be
// deterministic given the random source and the request, so runs are
// reproducible. A Fixture calls Sample under its own lock, so a model
// need not be safe for concurrent use with the same rng.
type Model interface {
	// Sample returns the service time of request r.
	Sample(rng *rand.Rand, r Request) time.Duration
	// String returns the model's compact text form, which ParseModel
	// parses back into an equal model.
	String() string
}

// ErrModel is wrapped by every error about an invalid latency model, from
// ParseModel and from StartFixture.
var ErrModel = errors.New("lab: invalid latency model")

// Sanity limits on models, checked by ParseModel and StartFixture.
const (
	// maxModelDuration bounds every duration in a model, and the draws of
	// a Lognormal.
	maxModelDuration = time.Minute
	// maxModelDepth bounds the nesting of models (Stalls inside Stalls).
	maxModelDepth = 8
	// maxModelText bounds the length of a model's text form.
	maxModelText = 64 << 10
)

// z99 is the 0.99 quantile of the standard normal distribution.
const z99 = 2.3263478740408408

// Constant serves every request in the same time. Text form: const:5ms.
type Constant time.Duration

// Sample implements Model.
func (c Constant) Sample(*rand.Rand, Request) time.Duration { return time.Duration(c) }

// String returns the text form, as const:5ms.
func (c Constant) String() string { return "const:" + time.Duration(c).String() }

// Lognormal draws log-normal service times with the given median and 99th
// percentile: ln(t) is normal with mu = ln(P50) and
// sigma = (ln(P99) - ln(P50)) / z(0.99). It wants P99 >= P50 > 0. Draws are
// capped at one minute, so that an extreme sigma cannot overflow. Text
// form: lognormal:p50=8ms,p99=90ms.
type Lognormal struct {
	P50 time.Duration // median service time
	P99 time.Duration // 99th percentile of service times
}

// Sample implements Model.
func (l Lognormal) Sample(rng *rand.Rand, _ Request) time.Duration {
	if l.P50 <= 0 {
		return 0
	}
	z := rng.NormFloat64()
	if l.P99 <= l.P50 {
		return l.P50
	}
	sigma := math.Log(float64(l.P99)/float64(l.P50)) / z99
	d := float64(l.P50) * math.Exp(sigma*z)
	if !(d < float64(maxModelDuration)) { // also catches +Inf
		return maxModelDuration
	}
	return time.Duration(d)
}

// String returns the text form, as lognormal:p50=8ms,p99=90ms.
func (l Lognormal) String() string {
	return "lognormal:p50=" + l.P50.String() + ",p99=" + l.P99.String()
}

// Straggler serves most requests in Fast and a Fraction of them in Slow,
// the shape of a replica with occasional garbage-collection pauses, queue
// build-ups or cold caches. Which requests straggle is random. Text form:
// straggler:frac=0.05,fast=1ms,slow=40ms.
type Straggler struct {
	Fraction float64       // share of slow requests, in [0, 1]
	Fast     time.Duration // service time of the others, >= 0
	Slow     time.Duration // service time of a straggler, > 0 and >= Fast
}

// Sample implements Model.
func (s Straggler) Sample(rng *rand.Rand, _ Request) time.Duration {
	if rng.Float64() < s.Fraction {
		return s.Slow
	}
	return s.Fast
}

// String returns the text form, as straggler:frac=0.05,fast=1ms,slow=40ms.
func (s Straggler) String() string {
	return "straggler:frac=" + strconv.FormatFloat(s.Fraction, 'g', -1, 64) +
		",fast=" + s.Fast.String() + ",slow=" + s.Slow.String()
}

// SlowIDs serves the requests whose id is listed in Slow and the others in
// Fast: deterministic stragglers. With PrimaryOnly, a hedge (a request with
// the Tailgate-Hedge header) of a listed id is fast, so whichever replica
// gets the primary straggles and the alternate answers fast. Lookup is
// linear in len(IDs). Text form: slowids:ids=3/17/42,fast=1ms,slow=80ms,primary
// (the trailing primary flag is optional).
type SlowIDs struct {
	IDs         []uint64      // the slow requests' ids; none means every request is fast
	Fast        time.Duration // service time of the others, >= 0
	Slow        time.Duration // service time of a listed id, > 0 and >= Fast
	PrimaryOnly bool          // hedges of listed ids are fast
}

// Sample implements Model.
func (s SlowIDs) Sample(_ *rand.Rand, r Request) time.Duration {
	if (r.Hedge && s.PrimaryOnly) || !slices.Contains(s.IDs, r.ID) {
		return s.Fast
	}
	return s.Slow
}

// String returns the text form, as slowids:ids=3/17/42,fast=1ms,slow=80ms,primary.
func (s SlowIDs) String() string {
	var b strings.Builder
	b.WriteString("slowids:ids=")
	for i, id := range s.IDs {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(strconv.FormatUint(id, 10))
	}
	b.WriteString(",fast=" + s.Fast.String() + ",slow=" + s.Slow.String())
	if s.PrimaryOnly {
		b.WriteString(",primary")
	}
	return b.String()
}

// Stalls models periodic stalls, like stop-the-world garbage-collection
// pauses or compactions: the replica stalls for For at the start of every
// period Every, that is during [k·Every, k·Every+For) since the fixture
// started, and a stall pauses all its work. A request arriving during a
// stall waits until the stall ends, then needs Base of work (Base sees the
// request as arriving at the stall's end); a request arriving outside a
// stall starts at once. Its work is paused by every stall it overlaps, in
// progress or not, so it completes once it has run for Base outside
// stalls: its latency is Base plus the stall time within
// [arrival, completion). Work that completes just as a stall begins is not
// paused. The latency is a function of the arrival time (Request.At) and
// the draw of Base; it saturates instead of overflowing. It wants
// 0 < For < Every. Text form: stalls:every=1s,for=100ms,base=const:1ms
// (base comes last and may contain commas).
type Stalls struct {
	Every time.Duration // period of the stalls
	For   time.Duration // length of each stall
	Base  Model         // work of a request, paused by stalls; nil means const:0s
}

// Sample implements Model.
func (s Stalls) Sample(rng *rand.Rand, r Request) time.Duration {
	stalls := s.Every > 0 && s.For > 0 && s.For < s.Every && r.At >= 0
	start := r.At
	if stalls {
		if phase := r.At % s.Every; phase < s.For {
			start += s.For - phase
		}
	}
	var work time.Duration
	if s.Base != nil {
		br := r
		br.At = start
		work = s.Base.Sample(rng, br)
	}
	wait := start - r.At
	switch {
	case work > math.MaxInt64-wait:
		return math.MaxInt64
	case !stalls || work <= 0:
		return wait + work
	}
	return s.complete(start, work) - r.At
}

// complete returns when work started at t, outside a stall, completes: the
// first time by which it has run for work > 0 outside stalls. It saturates
// at the largest Duration.
func (s Stalls) complete(t, work time.Duration) time.Duration {
	if t > math.MaxInt64-s.Every {
		return math.MaxInt64
	}
	// The first run ends where the next stall begins.
	next := t - t%s.Every + s.Every
	if work <= next-t {
		return t + work
	}
	work -= next - t
	// From next, each period runs Every-For of work after its stall; the
	// work ends in period k (from 0) with rest of it in that period, in
	// (0, Every-For].
	run := s.Every - s.For
	k := (work - 1) / run
	rest := work - k*run
	if k > (math.MaxInt64-next-s.For-rest)/s.Every {
		return math.MaxInt64
	}
	return next + k*s.Every + s.For + rest
}

// String returns the text form, as stalls:every=1s,for=100ms,base=const:1ms.
func (s Stalls) String() string {
	base := Model(Constant(0))
	if s.Base != nil {
		base = s.Base
	}
	return "stalls:every=" + s.Every.String() + ",for=" + s.For.String() + ",base=" + base.String()
}

// Spikes serves a Fraction of requests in Slow and the rest from Base: rare
// long spikes (a lock, a compaction, a GC pause) over an ordinary latency
// distribution. Text form: spikes:frac=0.0001,slow=1800ms,base=MODEL (base
// comes last and may contain commas).
type Spikes struct {
	Fraction float64       // share of spikes, in [0, 1]
	Slow     time.Duration // service time of a spike, > 0
	Base     Model         // service time of the others
}

// Sample implements Model.
func (s Spikes) Sample(rng *rand.Rand, r Request) time.Duration {
	if rng.Float64() < s.Fraction {
		return s.Slow
	}
	if s.Base == nil {
		return 0
	}
	return s.Base.Sample(rng, r)
}

// String returns the text form, as spikes:frac=0.0001,slow=1.8s,base=const:1ms.
func (s Spikes) String() string {
	base := Model(Constant(0))
	if s.Base != nil {
		base = s.Base
	}
	return "spikes:frac=" + strconv.FormatFloat(s.Fraction, 'g', -1, 64) + ",slow=" + s.Slow.String() + ",base=" + base.String()
}

// Batch serves a request that reads Keys items, each taking a time drawn
// from Base, in parallel: it completes when the slowest does (the maximum
// of Keys draws). A server request carrying a batch of keys has the tail
// of its slowest key. Text form: batch:keys=10,base=MODEL.
type Batch struct {
	Keys int   // items per request, in [1, maxBatchKeys]
	Base Model // each item's time
}

// maxBatchKeys bounds Batch.Keys: each request draws Keys times.
const maxBatchKeys = 10000

// Sample implements Model.
func (b Batch) Sample(rng *rand.Rand, r Request) time.Duration {
	var d time.Duration
	for range b.Keys {
		d = max(d, b.Base.Sample(rng, r))
	}
	return d
}

// String returns the text form, as batch:keys=10,base=const:1ms.
func (b Batch) String() string {
	base := Model(Constant(0))
	if b.Base != nil {
		base = b.Base
	}
	return "batch:keys=" + strconv.Itoa(b.Keys) + ",base=" + base.String()
}

// Phase is a replica that degrades for a while and recovers: a request
// arriving during [From, To) since the fixture started (Request.At) takes
// Factor times its draw from Base, capped at one minute; any other request
// takes its draw from Base. Every request draws from Base, so outside the
// phase the draws are those of Base alone, and the same request (same seed,
// id and attempt) is slowed by exactly Factor inside it. It wants
// 0 <= From < To <= 1h and 0 < Factor <= 1000. Text form:
// phase:from=8s,to=20s,factor=20,base=MODEL (base comes last and may
// contain commas).
type Phase struct {
	From   time.Duration // start of the phase, since the fixture started
	To     time.Duration // its end (excluded)
	Factor float64       // how many times slower a request is within it
	Base   Model         // the service time outside it; nil means const:0s
}

// maxPhaseTime bounds Phase.From and Phase.To: they are times in a run,
// not service times, so maxModelDuration does not bound them.
const maxPhaseTime = time.Hour

// maxPhaseFactor bounds Phase.Factor.
const maxPhaseFactor = 1000

// Sample implements Model.
func (p Phase) Sample(rng *rand.Rand, r Request) time.Duration {
	var d time.Duration
	if p.Base != nil {
		d = p.Base.Sample(rng, r)
	}
	if !p.Active(r.At) {
		return d
	}
	x := float64(d) * p.Factor
	if !(x < float64(maxModelDuration)) { // also catches +Inf and NaN
		return maxModelDuration
	}
	return time.Duration(x)
}

// Active reports whether a request arriving at at (since the fixture
// started) falls within the phase.
func (p Phase) Active(at time.Duration) bool { return at >= p.From && at < p.To }

// String returns the text form, as phase:from=8s,to=20s,factor=20,base=const:1ms.
func (p Phase) String() string {
	base := Model(Constant(0))
	if p.Base != nil {
		base = p.Base
	}
	return "phase:from=" + p.From.String() + ",to=" + p.To.String() +
		",factor=" + strconv.FormatFloat(p.Factor, 'g', -1, 64) + ",base=" + base.String()
}

// ParseModel parses a latency model from its text form, kind:key=value,...
// where keys may come in any order except base, which comes last:
//
//	const:DURATION
//	    every request takes DURATION.
//	lognormal:p50=DURATION,p99=DURATION
//	    log-normal service times with this median and 99th percentile;
//	    p99 >= p50 > 0.
//	straggler:frac=FRACTION,fast=DURATION,slow=DURATION
//	    a random share FRACTION (in [0, 1]) of requests take slow, the rest
//	    fast.
//	slowids:ids=ID/ID/...,fast=DURATION,slow=DURATION[,primary]
//	    requests whose "id" query parameter is listed take slow, the rest
//	    fast (an empty list is allowed); with primary, hedges of listed ids
//	    are fast.
//	stalls:every=DURATION,for=DURATION,base=MODEL
//	    the replica stalls during the first for of every period every
//	    (for < every), pausing all work; a request arriving during a stall
//	    waits for its end, and its work, MODEL (itself a model in this
//	    syntax), is paused by every stall it overlaps.
//	spikes:frac=FRACTION,slow=DURATION,base=MODEL
//	    a random share FRACTION of requests take slow (rare long spikes),
//	    the rest take MODEL.
//	batch:keys=N,base=MODEL
//	    each request reads N keys (1 to 10000) in parallel, each taking
//	    MODEL: it takes the slowest of N draws.
//	phase:from=DURATION,to=DURATION,factor=X,base=MODEL
//	    a replica that degrades for a while and recovers: a request
//	    arriving in [from, to) since the fixture started takes X times its
//	    draw from MODEL (capped at 1m), any other its draw from MODEL;
//	    0 <= from < to <= 1h and X, a decimal number, in (0, 1000].
//
// DURATION is a Go duration such as 250us, 1.5ms or 2s; FRACTION a decimal
// number such as 0.05; ID an unsigned integer. Fast durations may be 0,
// the others must be positive, and slow >= fast. Every duration is at most
// 1m (the from and to of a phase, times in a run, at most 1h), models nest
// at most 8 deep and the text is at most 64 KiB.
// Examples:
//
//	const:5ms
//	lognormal:p50=8ms,p99=90ms
//	straggler:frac=0.05,fast=1ms,slow=40ms
//	slowids:ids=3/17/42,fast=1ms,slow=80ms,primary
//	stalls:every=1s,for=100ms,base=lognormal:p50=2ms,p99=10ms
//	spikes:frac=0.0001,slow=1800ms,base=lognormal:p50=1ms,p99=12ms
//	batch:keys=10,base=lognormal:p50=1ms,p99=6ms
//	phase:from=8s,to=20s,factor=20,base=lognormal:p50=2ms,p99=10ms
//
// The String method of each model returns this form. Errors wrap ErrModel.
func ParseModel(s string) (Model, error) {
	if len(s) > maxModelText {
		return nil, fmt.Errorf("%w: text of %d bytes is longer than the limit of %d", ErrModel, len(s), maxModelText)
	}
	m, err := parseModel(s, 0)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrModel, abbreviate(s), err)
	}
	return m, nil
}

// modelKinds lists each kind's syntax, for error messages.
var modelKinds = []struct{ kind, syntax string }{
	{"const", "const:DURATION"},
	{"lognormal", "lognormal:p50=DURATION,p99=DURATION"},
	{"straggler", "straggler:frac=FRACTION,fast=DURATION,slow=DURATION"},
	{"slowids", "slowids:ids=ID/ID/...,fast=DURATION,slow=DURATION[,primary]"},
	{"stalls", "stalls:every=DURATION,for=DURATION,base=MODEL"},
	{"spikes", "spikes:frac=FRACTION,slow=DURATION,base=MODEL"},
	{"batch", "batch:keys=N,base=MODEL"},
	{"phase", "phase:from=DURATION,to=DURATION,factor=X,base=MODEL"},
}

func kindSyntax(kind string) string {
	for _, k := range modelKinds {
		if k.kind == kind {
			return k.syntax
		}
	}
	return ""
}

func abbreviate(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

func parseModel(s string, depth int) (Model, error) {
	if depth >= maxModelDepth {
		return nil, fmt.Errorf("models nest more than %d deep", maxModelDepth)
	}
	kind, body, ok := strings.Cut(s, ":")
	kind = strings.TrimSpace(kind)
	if !ok {
		if strings.TrimSpace(s) == "" {
			return nil, errors.New("empty; want kind:key=value,... such as straggler:frac=0.05,fast=1ms,slow=40ms")
		}
		return nil, fmt.Errorf("no kind: want kind:key=value,... with kind one of %s", kindList())
	}
	syntax := kindSyntax(kind)
	if syntax == "" {
		return nil, fmt.Errorf("unknown kind %q; want one of %s", kind, kindList())
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s; want %s", kind, fmt.Sprintf(format, args...), syntax)
	}
	var m Model
	switch kind {
	case "const":
		d, err := parseDuration(body)
		if err != nil {
			return nil, fail("%v", err)
		}
		m = Constant(d)
	case "lognormal":
		f, err := parseFields(body, []string{"p50", "p99"}, nil, "")
		if err != nil {
			return nil, fail("%v", err)
		}
		var l Lognormal
		if l.P50, err = fieldDuration(f, "p50"); err != nil {
			return nil, fail("%v", err)
		}
		if l.P99, err = fieldDuration(f, "p99"); err != nil {
			return nil, fail("%v", err)
		}
		m = l
	case "straggler":
		f, err := parseFields(body, []string{"frac", "fast", "slow"}, nil, "")
		if err != nil {
			return nil, fail("%v", err)
		}
		var st Straggler
		if st.Fraction, err = strconv.ParseFloat(f["frac"], 64); err != nil {
			return nil, fail("frac %q is not a number", f["frac"])
		}
		if st.Fast, err = fieldDuration(f, "fast"); err != nil {
			return nil, fail("%v", err)
		}
		if st.Slow, err = fieldDuration(f, "slow"); err != nil {
			return nil, fail("%v", err)
		}
		m = st
	case "slowids":
		f, err := parseFields(body, []string{"ids", "fast", "slow"}, []string{"primary"}, "")
		if err != nil {
			return nil, fail("%v", err)
		}
		var si SlowIDs
		for part := range strings.SplitSeq(f["ids"], "/") {
			if f["ids"] == "" {
				break // no ids: every request is fast
			}
			id, err := strconv.ParseUint(strings.TrimSpace(part), 10, 64)
			if err != nil {
				return nil, fail("id %q in ids is not an unsigned integer", part)
			}
			si.IDs = append(si.IDs, id)
		}
		if si.Fast, err = fieldDuration(f, "fast"); err != nil {
			return nil, fail("%v", err)
		}
		if si.Slow, err = fieldDuration(f, "slow"); err != nil {
			return nil, fail("%v", err)
		}
		_, si.PrimaryOnly = f["primary"]
		m = si
	case "stalls":
		f, err := parseFields(body, []string{"every", "for", "base"}, nil, "base")
		if err != nil {
			return nil, fail("%v", err)
		}
		var st Stalls
		if st.Every, err = fieldDuration(f, "every"); err != nil {
			return nil, fail("%v", err)
		}
		if st.For, err = fieldDuration(f, "for"); err != nil {
			return nil, fail("%v", err)
		}
		if st.Base, err = parseModel(f["base"], depth+1); err != nil {
			return nil, fmt.Errorf("stalls: base: %w", err)
		}
		m = st
	case "spikes":
		f, err := parseFields(body, []string{"frac", "slow", "base"}, nil, "base")
		if err != nil {
			return nil, fail("%v", err)
		}
		var sp Spikes
		if sp.Fraction, err = strconv.ParseFloat(f["frac"], 64); err != nil {
			return nil, fail("frac %q is not a number", f["frac"])
		}
		if sp.Slow, err = fieldDuration(f, "slow"); err != nil {
			return nil, fail("%v", err)
		}
		if sp.Base, err = parseModel(f["base"], depth+1); err != nil {
			return nil, fmt.Errorf("spikes: base: %w", err)
		}
		m = sp
	case "batch":
		f, err := parseFields(body, []string{"keys", "base"}, nil, "base")
		if err != nil {
			return nil, fail("%v", err)
		}
		var b Batch
		if b.Keys, err = strconv.Atoi(f["keys"]); err != nil {
			return nil, fail("keys %q is not an integer", f["keys"])
		}
		if b.Base, err = parseModel(f["base"], depth+1); err != nil {
			return nil, fmt.Errorf("batch: base: %w", err)
		}
		m = b
	case "phase":
		f, err := parseFields(body, []string{"from", "to", "factor", "base"}, nil, "base")
		if err != nil {
			return nil, fail("%v", err)
		}
		var p Phase
		if p.From, err = fieldDuration(f, "from"); err != nil {
			return nil, fail("%v", err)
		}
		if p.To, err = fieldDuration(f, "to"); err != nil {
			return nil, fail("%v", err)
		}
		if p.Factor, err = strconv.ParseFloat(f["factor"], 64); err != nil {
			return nil, fail("factor %q is not a number", f["factor"])
		}
		if p.Base, err = parseModel(f["base"], depth+1); err != nil {
			return nil, fmt.Errorf("phase: base: %w", err)
		}
		m = p
	}
	if err := checkModel(m, depth); err != nil {
		return nil, fmt.Errorf("%w; want %s", err, syntax)
	}
	return m, nil
}

func kindList() string {
	var b strings.Builder
	for i, k := range modelKinds {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k.kind)
	}
	return b.String()
}

// parseFields splits body, key=value,..., into a map. keys are the
// required keys, flags the optional keys without a value (present in the
// map with an empty value). The value of tail, if set, is the rest of the
// body, commas included.
func parseFields(body string, keys, flags []string, tail string) (map[string]string, error) {
	if strings.TrimSpace(body) == "" {
		return nil, errors.New("no keys")
	}
	f := make(map[string]string, len(keys)+len(flags))
	for rest := body; rest != ""; {
		field := rest
		rest = ""
		comma := strings.IndexByte(field, ',')
		eq := strings.IndexByte(field, '=')
		tailField := tail != "" && eq >= 0 && (comma < 0 || eq < comma) && strings.TrimSpace(field[:eq]) == tail
		if !tailField && comma >= 0 {
			field, rest = field[:comma], field[comma+1:]
			if rest == "" {
				return nil, errors.New("trailing comma")
			}
		}
		k, v, hasValue := strings.Cut(field, "=")
		k = strings.TrimSpace(k)
		switch {
		case k == "":
			return nil, errors.New("empty field")
		case !hasValue && slices.Contains(keys, k):
			return nil, fmt.Errorf("key %s has no value", k)
		case hasValue && slices.Contains(flags, k):
			return nil, fmt.Errorf("flag %s takes no value", k)
		case !slices.Contains(keys, k) && !slices.Contains(flags, k):
			return nil, fmt.Errorf("unknown key %q", k)
		}
		if _, dup := f[k]; dup {
			return nil, fmt.Errorf("duplicate key %s", k)
		}
		if !tailField {
			v = strings.TrimSpace(v)
		}
		f[k] = v
	}
	for _, k := range keys {
		if _, ok := f[k]; !ok {
			if _, ok := f[tail]; ok && tail != "" {
				return nil, fmt.Errorf("missing key %s (%s takes the rest of the text, so it comes last)", k, tail)
			}
			return nil, fmt.Errorf("missing key %s", k)
		}
	}
	return f, nil
}

func fieldDuration(f map[string]string, key string) (time.Duration, error) {
	d, err := parseDuration(f[key])
	if err != nil {
		return 0, fmt.Errorf("%s: %v", key, err)
	}
	return d, nil
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("no duration")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 5ms", s)
	}
	return d, nil
}

// validateModel checks the models of this package against the limits
// ParseModel enforces; other models pass. Errors wrap ErrModel.
func validateModel(m Model) error {
	if err := checkModel(m, 0); err != nil {
		return fmt.Errorf("%w %s: %v", ErrModel, abbreviate(describeModel(m)), err)
	}
	return nil
}

func describeModel(m Model) string {
	switch m.(type) {
	case Constant, Lognormal, Straggler, SlowIDs, Stalls, Spikes, Batch, Phase:
		return m.String()
	}
	return fmt.Sprintf("%T", m)
}

func checkModel(m Model, depth int) error {
	if depth >= maxModelDepth {
		return fmt.Errorf("models nest more than %d deep", maxModelDepth)
	}
	switch m := m.(type) {
	case Constant:
		return checkDuration("const", "duration", time.Duration(m), true)
	case Lognormal:
		if err := checkDuration("lognormal", "p50", m.P50, false); err != nil {
			return err
		}
		if err := checkDuration("lognormal", "p99", m.P99, false); err != nil {
			return err
		}
		if m.P99 < m.P50 {
			return fmt.Errorf("lognormal: p99 %v is below p50 %v", m.P99, m.P50)
		}
	case Straggler:
		if !(m.Fraction >= 0 && m.Fraction <= 1) {
			return fmt.Errorf("straggler: frac %v is outside [0, 1]", m.Fraction)
		}
		return checkFastSlow("straggler", m.Fast, m.Slow)
	case SlowIDs:
		return checkFastSlow("slowids", m.Fast, m.Slow)
	case Spikes:
		if math.IsNaN(m.Fraction) || m.Fraction < 0 || m.Fraction > 1 {
			return fmt.Errorf("spikes: frac %v is outside [0, 1]", m.Fraction)
		}
		if err := checkDuration("spikes", "slow", m.Slow, false); err != nil {
			return err
		}
		if m.Base == nil {
			return errors.New("spikes: no base model")
		}
		if err := checkModel(m.Base, depth+1); err != nil {
			return fmt.Errorf("spikes: base: %w", err)
		}
	case Batch:
		if m.Keys < 1 || m.Keys > maxBatchKeys {
			return fmt.Errorf("batch: keys %d is outside [1, %d]", m.Keys, maxBatchKeys)
		}
		if m.Base == nil {
			return errors.New("batch: no base model")
		}
		if err := checkModel(m.Base, depth+1); err != nil {
			return fmt.Errorf("batch: base: %w", err)
		}
	case Phase:
		switch {
		case m.From < 0 || m.From > maxPhaseTime:
			return fmt.Errorf("phase: from %v is outside [0, %v]", m.From, maxPhaseTime)
		case m.To <= m.From || m.To > maxPhaseTime:
			return fmt.Errorf("phase: to %v is outside (from %v, %v]", m.To, m.From, maxPhaseTime)
		case !(m.Factor > 0 && m.Factor <= maxPhaseFactor):
			return fmt.Errorf("phase: factor %v is outside (0, %d]", m.Factor, maxPhaseFactor)
		case m.Base == nil:
			return errors.New("phase: no base model")
		}
		if err := checkModel(m.Base, depth+1); err != nil {
			return fmt.Errorf("phase: base: %w", err)
		}
	case Stalls:
		if err := checkDuration("stalls", "every", m.Every, false); err != nil {
			return err
		}
		if err := checkDuration("stalls", "for", m.For, false); err != nil {
			return err
		}
		if m.For >= m.Every {
			return fmt.Errorf("stalls: for %v is not shorter than every %v", m.For, m.Every)
		}
		if m.Base == nil {
			return errors.New("stalls: no base model")
		}
		if err := checkModel(m.Base, depth+1); err != nil {
			return fmt.Errorf("stalls: base: %w", err)
		}
	}
	return nil
}

func checkFastSlow(kind string, fast, slow time.Duration) error {
	if err := checkDuration(kind, "fast", fast, true); err != nil {
		return err
	}
	if err := checkDuration(kind, "slow", slow, false); err != nil {
		return err
	}
	if slow < fast {
		return fmt.Errorf("%s: slow %v is below fast %v", kind, slow, fast)
	}
	return nil
}

func checkDuration(kind, key string, d time.Duration, zeroOK bool) error {
	switch {
	case d < 0 || (d == 0 && !zeroOK):
		want := "positive"
		if zeroOK {
			want = "at least 0"
		}
		return fmt.Errorf("%s: %s %v must be %s", kind, key, d, want)
	case d > maxModelDuration:
		return fmt.Errorf("%s: %s %v is above the limit of %v", kind, key, d, maxModelDuration)
	}
	return nil
}
