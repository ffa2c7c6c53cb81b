package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/internal/target"
)

// Defaults of a Config.
const (
	// DefaultRefresh is how often a name is resolved again, as HAProxy's
	// resolvers hold an answer (hold valid 10s) and Envoy's default
	// dns_refresh_rate is 5s: short enough for a rollout, long enough
	// not to load the DNS servers.
	DefaultRefresh = 10 * time.Second
	// DefaultTimeout bounds one resolution: its lookups, all of them.
	DefaultTimeout = 5 * time.Second
	// MinTTLRefresh is the soonest a short TTL brings the next
	// resolution (unless Refresh is sooner): a TTL of 0 or 1 would
	// otherwise ask the server in a loop.
	MinTTLRefresh = time.Second
)

// ErrNoBackends is Set's error when the entries give no replica at all:
// the gateway needs one.
var ErrNoBackends = errors.New("discovery: no backends")

// Config configures a Watcher.
type Config struct {
	// Resolver resolves the DNS entries. Nil: NewNetResolver("").
	Resolver Resolver
	// Refresh is how often each name is resolved again; sooner when its
	// records' TTL is known and shorter, but no sooner than
	// MinTTLRefresh (or Refresh, if less). A failed or empty resolution
	// is retried after Refresh. Default DefaultRefresh.
	Refresh time.Duration
	// Timeout bounds one resolution. Default DefaultTimeout.
	Timeout time.Duration
	// Logger receives the changes: of the backends, and of each name's
	// health (once when it starts failing or comes back empty, once when
	// it recovers). Nil discards them.
	Logger *slog.Logger
}

// State is a DNS entry's state, as State returns it.
type State struct {
	// Name is the entry as given (dns+http://...).
	Name string
	// Backends is its last good set: what it contributes to the
	// replicas. Empty when it has never resolved to anything.
	Backends []string
	// Resolved is when it last resolved to a non-empty set; zero: never.
	Resolved time.Time
	// TTL is that answer's shortest TTL, when HasTTL.
	TTL    time.Duration
	HasTTL bool
	// Next is when it is resolved again.
	Next time.Time
	// Stale says that its last resolution failed or came back empty, so
	// that Backends may be out of date; Problem says why, and Since
	// since when.
	Stale   bool
	Problem string
	Since   time.Time
	// Errors counts the resolutions that failed or came back empty
	// since the entry was added.
	Errors uint64
}

// Watcher keeps the replica URLs of a list of backend entries, static and
// DNS, current. Set gives it the entries (at start, on each reload); Run
// re-resolves them as they fall due. Its methods are safe for concurrent
// use; resolution rounds (Set's, Run's) take turns, so that a slow lookup
// of Run's never lands after a reload it predates.
type Watcher struct {
	cfg   Config
	round sync.Mutex // one resolution round, and its apply, at a time
	wake  chan struct{}

	mu       sync.Mutex // guards what follows
	specs    []Spec
	entries  map[string]*entry // DNS entries, by Raw
	backends []string          // as last applied
}

// entry is a DNS entry's state (see State).
type entry struct {
	spec     Spec
	backends []string
	resolved time.Time
	ttl      time.Duration
	hasTTL   bool
	next     time.Time
	problem  string
	kind     string // "" (fresh), "failed" or "empty": what was last logged
	since    time.Time
	errors   uint64
}

// New returns a Watcher with no entries.
func New(cfg Config) *Watcher {
	if cfg.Resolver == nil {
		cfg.Resolver = NewNetResolver("")
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{cfg: cfg, wake: make(chan struct{}, 1), entries: map[string]*entry{}}
}

// ParseAll parses each entry (see Parse).
func ParseAll(raw []string) ([]Spec, error) {
	specs := make([]Spec, 0, len(raw))
	for _, r := range raw {
		s, err := Parse(r)
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// Set replaces the entries with raw (static URLs and DNS entries, in
// order), resolves every DNS entry now, and calls apply with the replicas
// they give (see Backends), whether or not they changed: it is a reload,
// and what else the caller reloads may have. An entry kept from the list
// before keeps its state: when its resolution fails or comes back empty
// now, its last good set stands. A new one that does not resolve gives no
// replica until it does (Run keeps trying).
//
// Set returns an error, changing nothing, when an entry does not parse,
// when apply does, or, without calling apply, when there is no replica at
// all (wrapping ErrNoBackends, with why). The one change then: at the
// first Set (nothing applied yet) the entries are kept, for State to
// report and Await to go on from.
func (w *Watcher) Set(ctx context.Context, raw []string, apply func([]string) error) error {
	return w.set(ctx, raw, apply, false)
}

// Await is Set for a start that may come before its names have records
// (a gateway's pods started before the replicas'): while raw gives no
// replica, it keeps the entries (State says why each gives none) and
// resolves each again as it falls due, as Run would, logging a name's
// problem once rather than at each try; it returns once apply has taken
// the first replicas, or with ctx's error, or another error of Set's. It
// goes on from a Set that found no replica (at start: see Set): the names
// that Set resolved are resolved again when due, not at once; a name new
// to the watcher, at once.
func (w *Watcher) Await(ctx context.Context, raw []string, apply func([]string) error) error {
	specs, err := ParseAll(raw)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(specs, func(s Spec) bool { return s.Kind != Static }) {
		return w.Set(ctx, raw, apply) // no name to wait for
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if at := w.resumeAt(specs); !at.IsZero() {
			timer.Reset(time.Until(at))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			}
		}
		err := w.set(ctx, raw, apply, true)
		if ctx.Err() != nil {
			return ctx.Err() // a lookup cut short is not the names' answer
		}
		if !errors.Is(err, ErrNoBackends) {
			return err
		}
	}
}

// resumeAt returns when the soonest of specs' DNS entries falls due, or
// zero when one of them has no state yet (it is to be resolved now).
func (w *Watcher) resumeAt(specs []Spec) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var at time.Time
	for _, s := range specs {
		if s.Kind == Static {
			continue
		}
		e := w.entries[s.Raw]
		if e == nil {
			return time.Time{}
		}
		if at.IsZero() || e.next.Before(at) {
			at = e.next
		}
	}
	return at
}

// due returns when the soonest entry is resolved again (zero: none is).
func (w *Watcher) due() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var next time.Time
	for _, e := range w.entries {
		if next.IsZero() || e.next.Before(next) {
			next = e.next
		}
	}
	return next
}

// set is Set; with keepEmpty, a round that gives no replica keeps the
// entries it resolved (for Await's next round, and for State), still
// without calling apply.
func (w *Watcher) set(ctx context.Context, raw []string, apply func([]string) error, keepEmpty bool) error {
	specs, err := ParseAll(raw)
	if err != nil {
		return err
	}
	w.round.Lock()
	defer w.round.Unlock()
	var dns []Spec
	for _, s := range specs {
		if s.Kind != Static && !slices.ContainsFunc(dns, func(d Spec) bool { return d.Raw == s.Raw }) {
			dns = append(dns, s)
		}
	}
	results := w.resolve(ctx, dns)
	w.mu.Lock()
	entries := make(map[string]*entry, len(dns))
	var problems []string
	for i, s := range dns {
		e := &entry{spec: s}
		if old := w.entries[s.Raw]; old != nil {
			c := *old // a copy: committed only if apply succeeds
			e = &c
		}
		w.record(e, results[i])
		entries[s.Raw] = e
		if len(e.backends) == 0 {
			problems = append(problems, s.Raw+": "+e.problem)
		}
	}
	merged := merge(specs, entries)
	if len(merged) == 0 && (keepEmpty || w.backends == nil) {
		// Nothing applied yet (a start), or Await's: nothing to keep
		// as it was, and the entries' state (when each falls due, what
		// was logged) is Await's to go on from.
		w.specs, w.entries = specs, entries
	}
	w.mu.Unlock()
	if len(merged) == 0 {
		return fmt.Errorf("%w: %s", ErrNoBackends, strings.Join(problems, "; "))
	}
	if err := apply(merged); err != nil {
		return err
	}
	w.mu.Lock()
	w.specs, w.entries, w.backends = specs, entries, merged
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}: // Run's schedule changed
	default:
	}
	return nil
}

// Run resolves each DNS entry as it falls due and, whenever the replicas
// change, calls apply with them, until ctx ends. An apply that fails is
// logged, and tried again at the next change or resolution.
func (w *Watcher) Run(ctx context.Context, apply func([]string) error) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		next := w.due()
		timer.Stop()
		var due <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
			continue
		case <-due:
		}
		w.refresh(ctx, apply)
	}
}

// refresh resolves the entries due, and applies a change of replicas.
func (w *Watcher) refresh(ctx context.Context, apply func([]string) error) {
	w.round.Lock()
	defer w.round.Unlock()
	now := time.Now()
	var due []*entry
	var specs []Spec
	w.mu.Lock()
	for _, s := range w.specs {
		if e := w.entries[s.Raw]; e != nil && !e.next.After(now) && !slices.Contains(due, e) {
			due = append(due, e)
			specs = append(specs, e.spec)
		}
	}
	w.mu.Unlock()
	if len(due) == 0 {
		return
	}
	results := w.resolve(ctx, specs)
	if ctx.Err() != nil {
		return // ending: a lookup cut short is not the name's failure
	}
	// The entries are still the ones in force: only Set replaces them,
	// and it waits for the round.
	w.mu.Lock()
	for i, e := range due {
		w.record(e, results[i])
	}
	merged, old := merge(w.specs, w.entries), w.backends
	w.mu.Unlock()
	if len(merged) == 0 || slices.Equal(merged, old) {
		return // empty: unreachable, a name keeps its last good set
	}
	if err := apply(merged); err != nil {
		w.cfg.Logger.Error("discovery: the new backends were refused; the running ones are kept", "err", err)
		return
	}
	w.mu.Lock()
	w.backends = merged
	w.mu.Unlock()
	var added, removed []string
	for _, b := range merged {
		if !slices.Contains(old, b) {
			added = append(added, b)
		}
	}
	for _, b := range old {
		if !slices.Contains(merged, b) {
			removed = append(removed, b)
		}
	}
	w.cfg.Logger.Info("discovery: backends changed", "added", strings.Join(added, ","), "removed", strings.Join(removed, ","), "replicas", len(merged))
}

// result is one resolution's outcome, and when it started.
type result struct {
	answer Answer
	err    error
	at     time.Time
}

// resolve resolves specs at once, each within the timeout.
func (w *Watcher) resolve(ctx context.Context, specs []Spec) []result {
	results := make([]result, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
			defer cancel()
			results[i].at = time.Now()
			results[i].answer, results[i].err = w.cfg.Resolver.Resolve(ctx, s)
		})
	}
	wg.Wait()
	return results
}

// record applies r to e and schedules e's next resolution, logging a
// change of e's health. Called with mu held.
func (w *Watcher) record(e *entry, r result) {
	log := w.cfg.Logger
	interval := w.cfg.Refresh
	if r.err == nil {
		if e.kind != "" {
			log.Info("discovery: name resolves again", "name", e.spec.Raw, "replicas", len(r.answer.URLs),
				"staleFor", r.at.Sub(e.since).Round(time.Millisecond), "errors", e.errors)
		}
		e.backends, e.resolved = r.answer.URLs, r.at
		e.ttl, e.hasTTL = r.answer.TTL, r.answer.HasTTL
		e.problem, e.kind, e.since = "", "", time.Time{}
		if e.hasTTL && e.ttl < interval {
			interval = max(e.ttl, min(MinTTLRefresh, interval))
		}
		e.next = r.at.Add(interval)
		return
	}
	e.errors++
	e.problem = r.err.Error()
	e.next = r.at.Add(interval)
	kind := "failed"
	if errors.Is(r.err, ErrEmpty) {
		kind = "empty"
	}
	if kind == e.kind {
		return // logged when it started
	}
	if e.kind == "" {
		e.since = r.at
	}
	e.kind = kind
	msg := "discovery: name did not resolve"
	if kind == "empty" {
		msg = "discovery: name has no records"
	}
	if len(e.backends) > 0 {
		msg += "; its last good replicas are kept" // never none
	} else {
		msg += "; it gives no replica until it does"
	}
	log.Warn(msg, "name", e.spec.Raw, "err", r.err, "kept", len(e.backends), "retry", interval)
}

// merge returns the replicas of specs: static entries as given, each DNS
// entry's set in its place. A replica a DNS entry gives that an entry
// before it already gave (however spelled) is left out: two names for one
// server would defeat hedging. Duplicate static entries are kept, for the
// gateway to refuse as it always has.
func merge(specs []Spec, entries map[string]*entry) []string {
	seen := map[string]bool{}
	key := func(b string) string {
		if u, err := target.Parse(b); err == nil {
			return u.String()
		}
		return b
	}
	for _, s := range specs {
		if s.Kind == Static {
			seen[key(s.Raw)] = true
		}
	}
	var out []string
	for _, s := range specs {
		if s.Kind == Static {
			out = append(out, s.Raw)
			continue
		}
		for _, b := range entries[s.Raw].backends {
			if k := key(b); !seen[k] {
				seen[k] = true
				out = append(out, b)
			}
		}
	}
	return out
}

// Backends returns the replicas as last applied.
func (w *Watcher) Backends() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.backends)
}

// State returns each DNS entry's state, in the entries' order.
func (w *Watcher) State() []State {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []State
	for _, s := range w.specs {
		e := w.entries[s.Raw]
		if e == nil || slices.ContainsFunc(out, func(st State) bool { return st.Name == s.Raw }) {
			continue
		}
		out = append(out, State{
			Name: s.Raw, Backends: slices.Clone(e.backends), Resolved: e.resolved, TTL: e.ttl, HasTTL: e.hasTTL,
			Next: e.next, Stale: e.kind != "", Problem: e.problem, Since: e.since, Errors: e.errors,
		})
	}
	return out
}
