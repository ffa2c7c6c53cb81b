package hedge

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of a Classes.
const (
	// MaxClasses bounds the classes a Classes keeps at once; the requests
	// of further classes share OtherClass.
	MaxClasses = 64
	// OtherClass is the class of the requests whose own class found no
	// room (see MaxClasses).
	OtherClass = "other"
	// ClassIdle is how long a class may go without an operation before
	// Classes forgets it (and its latencies), to make room for another.
	ClassIdle = 10 * time.Minute
)

// Classes is a set of Hedgers, one per class of request, made on first use
// from one Policy and sharing its Budget. The paper's rule is to hedge a
// request once it has been outstanding longer than the 95th-percentile
// expected latency "for this class of requests": a point read and a search
// differ tenfold, and one latency window for both gives each the wrong
// delay, and the overload gate the wrong evidence. So each class learns its
// own latencies, delay and gate, while the Budget, which bounds the work
// the targets take, stays one: a class whose hedges do not win shuts its
// own gate and stops spending it, and cannot shut hedging for a class
// whose hedges do.
//
// At most MaxClasses classes are kept; a class without an operation for
// ClassIdle is forgotten when room is needed, and the requests of classes
// that find none share OtherClass (Overflowed counts them). Safe for
// concurrent use.
type Classes struct {
	mu     sync.Mutex // serialises changes: a new class, Update, forgetting
	policy Policy     // the template, defaults filled in, Budget set
	budget *Budget
	// byName maps each class to its Hedger, and byKey the hash of a
	// request's default class (see classKey) to the same: both are
	// replaced whole on a change, so that lookups take no lock.
	byName atomic.Pointer[map[string]*Hedger]
	byKey  atomic.Pointer[map[uint64]*Hedger]
	other  atomic.Pointer[Hedger]
	over   atomic.Uint64
	late   *lateness // the process's timer lateness, measured by every class
	swept  time.Time // when forgetIdle last ran, at most every sweepEvery
}

// sweepEvery spaces the looks for idle classes that a full set makes, and
// maxKeys bounds the request keys remembered (those of OtherClass
// included, so that a flood of new classes is sent there without a lock).
const (
	sweepEvery = time.Second
	maxKeys    = 4 * MaxClasses
)

// NewClasses returns an empty set of classes under p: each class's Hedger
// is New(p), all sharing p.Budget (a new Budget with the defaults when nil).
// Errors wrap ErrInvalid.
func NewClasses(p Policy) (*Classes, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Classes{policy: p, budget: p.Budget, late: newLateness()}
	c.byName.Store(&map[string]*Hedger{})
	c.byKey.Store(&map[uint64]*Hedger{})
	return c, nil
}

// Budget returns the Budget the classes share.
func (c *Classes) Budget() *Budget { return c.budget }

// Policy returns the policy each class's Hedger is made with.
func (c *Classes) Policy() Policy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.policy
}

// Hedger returns the Hedger of class, making it if it is new.
func (c *Classes) Hedger(class string) *Hedger {
	if h := (*c.byName.Load())[class]; h != nil {
		return h
	}
	return c.add(class, 0, false)
}

// ForRequest returns the Hedger of r's default class, DefaultClass(r),
// without allocating once the class is known: a request's class is looked
// up by a hash of its method and path template.
func (c *Classes) ForRequest(r *http.Request) *Hedger {
	k := classKey(r.Method, requestPath(r))
	if h := (*c.byKey.Load())[k]; h != nil {
		return h
	}
	return c.add(DefaultClass(r), k, true)
}

// add returns class's Hedger, making it if there is room (and under key,
// for ForRequest, if byKey), else OtherClass's.
func (c *Classes) add(class string, key uint64, byKey bool) *Hedger {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := *c.byName.Load()
	h := names[class]
	if h == nil && len(names) >= MaxClasses {
		if now := time.Now(); now.Sub(c.swept) >= sweepEvery {
			c.swept = now
			c.forgetIdle(now)
			names = *c.byName.Load()
		}
		if len(names) >= MaxClasses {
			c.over.Add(1)
			h = c.otherLocked()
		}
	}
	if h == nil {
		h = c.newHedger(class)
		next := make(map[string]*Hedger, len(names)+1)
		for k, v := range names {
			next[k] = v
		}
		next[class] = h
		c.byName.Store(&next)
	}
	if keys := *c.byKey.Load(); byKey && len(keys) < maxKeys {
		next := make(map[uint64]*Hedger, len(keys)+1)
		for k, v := range keys {
			next[k] = v
		}
		next[key] = h
		c.byKey.Store(&next)
	}
	return h
}

// newHedger makes class's Hedger under the template. Called with c.mu
// held.
func (c *Classes) newHedger(class string) *Hedger {
	h := newHedger(c.policy, c.late) // checked by NewClasses and Update
	h.class = class
	h.touch(time.Now()) // new: not idle
	return h
}

// otherLocked returns OtherClass's Hedger. Called with c.mu held.
func (c *Classes) otherLocked() *Hedger {
	if h := c.other.Load(); h != nil {
		return h
	}
	h := c.newHedger(OtherClass)
	c.other.Store(h)
	return h
}

// forgetIdle forgets the classes without an operation for ClassIdle, and
// the request keys sent to OtherClass (so that they may have a class of
// their own now). Called with c.mu held.
func (c *Classes) forgetIdle(now time.Time) {
	cut := now.Add(-ClassIdle).Unix()
	names := *c.byName.Load()
	next := make(map[string]*Hedger, len(names))
	for k, h := range names {
		if h.lastUsed.Load() >= cut {
			next[k] = h
		}
	}
	keys := *c.byKey.Load()
	nextKeys := make(map[uint64]*Hedger, len(keys))
	for k, h := range keys {
		if h.lastUsed.Load() >= cut && h.class != OtherClass {
			nextKeys[k] = h
		}
	}
	c.byName.Store(&next)
	c.byKey.Store(&nextKeys)
}

// Overflowed counts the lookups that found no room for their class and
// went to OtherClass.
func (c *Classes) Overflowed() uint64 { return c.over.Load() }

// Update changes the policy of every class, and of those to come, to p, as
// Hedger.Update does: each keeps what it has learnt where p allows. p's
// Budget must be nil or the shared one. It fails, changing nothing, with
// an error wrapping ErrInvalid.
func (c *Classes) Update(p Policy) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Checked as one Hedger's Update would, before any changes: a
	// throwaway Hedger with the template's state.
	check, err := New(c.policy)
	if err != nil {
		return err
	}
	if err := check.Update(p); err != nil {
		return err
	}
	next := check.Policy()
	next.Observer = c.policy.Observer
	for _, h := range c.all() {
		h.Update(p) // checked above: cannot fail
	}
	c.policy = next
	return nil
}

// all returns every Hedger, OtherClass's included. Called with c.mu held.
func (c *Classes) all() []*Hedger {
	var hs []*Hedger
	for _, h := range *c.byName.Load() {
		hs = append(hs, h)
	}
	if h := c.other.Load(); h != nil {
		hs = append(hs, h)
	}
	return hs
}

// Class is one class of a Classes: its name and Hedger.
type Class struct {
	Name   string
	Hedger *Hedger
}

// List returns the classes, OtherClass last if it was used, the others in
// the order of their names.
func (c *Classes) List() []Class {
	var out []Class
	for name, h := range *c.byName.Load() {
		out = append(out, Class{name, h})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if h := c.other.Load(); h != nil {
		out = append(out, Class{OtherClass, h})
	}
	return out
}

// DefaultClass returns r's class as Classes.ForRequest sees it: its
// method and its path's template, "GET /item/{id}", the path segments
// that look like identifiers collapsed to "{id}" (see isIdentifier) and
// the query ignored. A Transport's Class default.
func DefaultClass(r *http.Request) string {
	path := requestPath(r)
	var b strings.Builder
	b.Grow(len(r.Method) + 1 + len(path))
	b.WriteString(r.Method)
	b.WriteByte(' ')
	n := 0
	for seg := range segments(path) {
		b.WriteByte('/')
		if isIdentifier(seg) {
			b.WriteString("{id}")
		} else {
			b.WriteString(seg)
		}
		n++
	}
	if n == 0 || strings.HasSuffix(path, "/") {
		b.WriteByte('/')
	}
	return b.String()
}

// requestPath returns r's path as sent: the escaped form, so that an
// encoded slash stays inside its segment.
func requestPath(r *http.Request) string {
	if r.URL == nil {
		return "/"
	}
	if r.URL.Opaque != "" {
		p, _, _ := strings.Cut(r.URL.Opaque, "?")
		return p
	}
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	return r.URL.Path
}

// segments yields the non-empty segments of path.
func segments(path string) func(yield func(seg string) bool) {
	return func(yield func(string) bool) {
		for path != "" {
			var seg string
			seg, path, _ = strings.Cut(strings.TrimLeft(path, "/"), "/")
			if seg != "" && !yield(seg) {
				return
			}
		}
	}
}

// classKey hashes method and path's template (FNV-1a, 64 bits) as
// DefaultClass spells it, without building the string.
func classKey(method, path string) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	add := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= prime
		}
	}
	add(method)
	add(" ")
	n := 0
	for seg := range segments(path) {
		add("/")
		if isIdentifier(seg) {
			add("{id}")
		} else {
			add(seg)
		}
		n++
	}
	if n == 0 || strings.HasSuffix(path, "/") {
		add("/")
	}
	return h
}

// isIdentifier reports whether a path segment looks like an identifier,
// which a path template collapses: all digits ("42"); a UUID; 16 hex digits
// or more (a hash, an object id); or 16 characters or more of base64's
// URL alphabet holding a digit (a token, a key). Other segments, names
// ("item", "v2", "search"), stay.
func isIdentifier(seg string) bool {
	if seg == "" {
		return false
	}
	digits, hex, b64 := 0, 0, 0
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
			hex++
			b64++
		case c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F':
			hex++
			b64++
		case c >= 'g' && c <= 'z' || c >= 'G' && c <= 'Z' || c == '_' || c == '-' || c == '=':
			b64++
		}
	}
	n := len(seg)
	switch {
	case digits == n:
		return true
	case n == 36 && isUUID(seg):
		return true
	case n >= 16 && hex == n:
		return true
	}
	return n >= 16 && b64 == n && digits > 0
}

// isUUID reports whether s is 8-4-4-4-12 hex digits.
func isUUID(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
			continue
		}
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
