package skew

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/partition"
	"github.com/tailgate-dev/tailgate/replica"
)

// placement is how a policy places keys on replicas.
type placement int

const (
	// anywhere: no affinity, every replica serves every key.
	anywhere placement = iota
	// modN: a key's replica is a hash of it mod N.
	modN
	// micro: micro-partitions (package partition).
	micro
)

// Policy is one way of routing the reads, as the report names it.
type Policy struct {
	Name      string
	placement placement
	// hot: selective replication of hot keys (micro only).
	hot bool
	// hedging: reads are hedged (the hedge engine's default policy);
	// otherwise one attempt each.
	hedging bool
}

// The policies' names, as the issue names them.
const (
	NoAffinity   = "no affinity"
	OnePerRepl   = "one partition per replica"
	Micro        = "micro-partitions"
	MicroHot     = "micro-partitions + selective replication"
	noHedgeTitle = ", no hedging"
)

// policies are the experiment's policies, in the order they run: each
// hedged, then without hedging.
func policies() []Policy {
	var ps []Policy
	for _, p := range []Policy{{Name: NoAffinity, placement: anywhere}, {Name: OnePerRepl, placement: modN},
		{Name: Micro, placement: micro}, {Name: MicroHot, placement: micro, hot: true}} {
		h := p
		h.hedging = true
		p.Name += noHedgeTitle
		ps = append(ps, h, p)
	}
	return ps
}

// modOf returns key's replica under hash mod n: FNV-1a, a fixed hash, so
// that a key lands on the same replica in every process and run, as a
// client library's hash mod N does (where the hot keys land follows their
// names, which follow the experiment's seed).
func modOf(key string, n int) int {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	return int(h % uint64(n))
}

// router routes one run's reads: it picks each attempt's replica through
// the replica set (power of two choices by peak-EWMA latency × attempts in
// flight for a primary, the cheapest for a hedge), restricted to the key's
// replicas under the policy. The micro-partition policies steer as the
// gateway's affinity mode does, through replica.Route: a key's primary to
// its partition's home whenever the home admits one (RouteHome), a hot
// key's among its replicas, a hedge to another of them, and anywhere only
// when none of them admits an attempt (a fallback). With an in-flight
// bound (Config.InFlightBound) they judge the home's load per read
// instead, as HAProxy's hash-balance-factor does: the evidence for
// judging it in the partition table (docs/lab.md).
type router struct {
	pol    Policy
	set    *replica.Set
	names  []string
	urls   []string
	index  map[string]int
	table  *partition.Table // micro only
	bound  float64          // micro: the in-flight bound of a home, 0 for none (see Config.InFlightBound)
	client *http.Client
	hedger *hedge.Hedger

	launched  atomic.Int64   // attempts of every read
	attempts  []atomic.Int32 // attempts of each read, by its index
	fallbacks atomic.Int64   // attempts sent outside their key's replicas
	// suppressed holds each hedged read's suppressed hedges, from its
	// receipt; receipts counts the receipts, sent the reads sent.
	suppressed     []hedge.Suppressions
	receipts, sent atomic.Int64
}

// read is one read's routing state.
type read struct {
	id  int
	key string
	// first and alternates are the replicas a primary and a hedge go to;
	// nil means any. home: first[0] is the key's home (micro, a key that
	// is not hot).
	first, alternates []int
	home              bool
	// route steers the micro policies' reads without an in-flight bound:
	// the gateway's steering.
	route    replica.Route
	useRoute bool
	picked   [hedge.MaxAttemptsCap]time.Time // route: when each attempt was picked
	tickets  [hedge.MaxAttemptsCap]replica.Ticket
}

// route fills rd's replicas at now, its arrival.
func (r *router) route(rd *read, now time.Time) {
	n := len(r.names)
	switch r.pol.placement {
	case modN:
		// One replica holds the key; its successor takes the hedges, as the
		// next replica on a ring would.
		i := modOf(rd.key, n)
		rd.first, rd.alternates = []int{i}, []int{(i + 1) % n}
	case micro:
		o := r.table.OwnersAt(rd.key, now)
		among := make([]int, 0, len(o.Replicas))
		for _, name := range o.Replicas {
			among = append(among, r.index[name])
		}
		rd.first, rd.alternates, rd.home = among, among, !o.Hot && !o.Shared
		if r.bound == 0 {
			rd.useRoute = true
			if rd.home {
				rd.route = r.set.RouteHome(among, false)
			} else {
				rd.route = r.set.Route(among, false)
			}
		}
	}
}

// overBound reports whether home is above the in-flight bound: one more
// attempt would take it past bound × the mean in flight per replica (the
// attempt counted), HAProxy's rule for a server under hash-balance-factor.
func (r *router) overBound(home int, now time.Time) bool {
	total, at := int64(0), int64(0)
	for i, st := range r.set.Snapshot(now) {
		total += st.InFlight
		if i == home {
			at = st.InFlight
		}
	}
	return float64(at+1) > math.Ceil(r.bound*float64(total+1)/float64(len(r.names)))
}

// pick picks attempt a's replica, the earlier attempts having used used.
// Called by the hedge engine with the operation's lock held.
func (r *router) pick(rd *read, a hedge.Attempt, used []int) (int, bool) {
	now := time.Now()
	var (
		i  int
		t  replica.Ticket
		ok bool
	)
	if rd.useRoute {
		before := rd.route.Fallbacks()
		if i, ok = rd.route.Pick(a.Index, false, used, now); !ok {
			return 0, false
		}
		r.fallbacks.Add(int64(rd.route.Fallbacks() - before))
		rd.picked[a.Index] = now
		r.launched.Add(1)
		r.attempts[rd.id].Add(1)
		return i, true
	}
	want, among := replica.Attempt{Role: replica.Primary}, rd.first
	if a.Index > 0 {
		want, among = replica.Attempt{Role: replica.Hedge, Exclude: used}, rd.alternates
	} else if rd.home {
		// The home unless it is above the in-flight bound, then the
		// others of the key's owners.
		among = rd.first[:1]
		if len(rd.first) > 1 && r.overBound(rd.first[0], now) {
			among = rd.first[1:]
		}
	}
	if among != nil {
		want.Among = among
		i, t, ok = r.set.Pick(now, want)
		want.Among = nil
	}
	if !ok {
		i, t, ok = r.set.Pick(now, want)
		r.fellBack(rd)
	}
	if !ok {
		return 0, false
	}
	rd.tickets[a.Index] = t
	r.launched.Add(1)
	r.attempts[rd.id].Add(1)
	return i, true
}

func (r *router) fellBack(rd *read) {
	if rd.first != nil {
		r.fallbacks.Add(1)
	}
}

// do reads rd, hedged or not under the policy, and returns the replica
// that answered.
func (r *router) do(ctx context.Context, rd *read) (int, error) {
	r.route(rd, time.Now())
	query := "/item?id=" + strconv.Itoa(rd.id) + "&key=" + rd.key
	r.sent.Add(1)
	var onReceipt func(hedge.Receipt)
	if r.pol.hedging {
		onReceipt = func(rc hedge.Receipt) {
			r.suppressed[rd.id] = rc.HedgesSuppressed
			r.receipts.Add(1) // after the write: whoever reads the count sees it
		}
	}
	return hedge.Do(ctx, r.hedger, hedge.Op[int]{
		Targets:   r.names,
		OnReceipt: onReceipt,
		Steering:  steer{r, rd},
		Call: func(ctx context.Context, a hedge.Attempt) (int, error) {
			err := exp.Read(ctx, r.client, r.urls[a.Target]+query)
			o := replica.Success
			switch {
			case ctx.Err() != nil:
				o = replica.Canceled
			case err != nil:
				o = replica.Failure
			}
			if rd.useRoute {
				rd.route.Done(a.Index, o, time.Since(rd.picked[a.Index]))
			} else {
				r.set.Done(rd.tickets[a.Index], o, time.Now())
			}
			return a.Target, err
		},
	})
}

// record counts rd's read, decided with winner (-1: none), for its key in
// the partition table, as the gateway does once a read is decided.
func (r *router) record(rd *read, winner int, arrived time.Time) {
	if r.table == nil {
		return
	}
	name := ""
	if winner >= 0 {
		name = r.names[winner]
	}
	r.table.RecordAt(rd.key, name, arrived)
}

// steer is the engine's Steering of one read: the router's placement
// (for one partition per replica a key's replica, then its successor,
// which replica.Route does not offer, for it is what the experiment
// compares; for micro-partitions replica.Route, as the gateway).
type steer struct {
	r  *router
	rd *read
}

func (s steer) Pick(a hedge.Attempt, used []int) (int, error) {
	if i, ok := s.r.pick(s.rd, a, used); ok {
		return i, nil
	}
	return -1, hedge.ErrNoTarget
}

// Done: Call gives the ticket back itself, with the answer it read.
func (steer) Done(hedge.Attempt, hedge.Result) {}
