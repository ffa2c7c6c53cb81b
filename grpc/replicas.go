package hedgegrpc

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Defaults of a ReplicasConfig.
const (
	DefaultShadowTimeout      = time.Second
	DefaultMaxInFlightShadows = 8
)

// Target is one replica of a Replicas.
type Target struct {
	// Name identifies the replica in receipts and in the replica set's
	// Snapshot. With ReplicasConfig.Tied it must be the replica's host:port
	// as its peers' ServerConfig.Peers list it: a tied copy names its
	// twin's server by it.
	Name string
	// Conn reaches this replica alone: a *grpc.ClientConn dialled to its
	// address, say. Replicas calls its Invoke and NewStream (so its own
	// interceptors run) and never closes it.
	Conn grpc.ClientConnInterface
}

// ReplicasConfig configures Replicas. Targets, and Methods or Hedgeable,
// are required.
type ReplicasConfig struct {
	// Config is the hedging of unary calls, as for NewClient. A nil
	// Policy.Gate.Load reports the share of replicas whose breaker is open
	// (the overload gate's "unavailable" signal).
	Config

	// Targets are the interchangeable replicas: at least one, names unique.
	Targets []Target

	// Replica configures the replica set: breakers (FailureThreshold,
	// Cooldown, ...), the peak-EWMA decay and probation. With
	// Replica.Probation.Enabled, a replica on probation gets only shadow
	// calls: after a hedged call succeeds, a copy of its request goes to a
	// replica on probation that is due one, in the background, marked
	// with tailgate-shadow and tailgate-hedge, its answer discarded. Shadows copy
	// hedged methods only, which are idempotent by declaration.
	Replica replica.Config

	// Tied sends tied calls instead of hedges: every hedged call sends a
	// second copy TiedDelay after the first, to another replica, each copy
	// naming its twin's server (tailgate-tie, tailgate-tie-peer); the replicas' Server
	// interceptors cancel the queued twin when a copy starts. It needs at
	// least two targets named host:port, and overrides Policy as
	// tied.Transport does: a fixed delay, two attempts, no budget, gate or
	// deadline check (both copies of every call are meant to go).
	Tied bool

	// TiedDelay is how long a tied call waits for its first copy before
	// sending the second. Default tied.DefaultDelay (1ms); negative sends
	// both at once.
	TiedDelay time.Duration

	// ShadowTimeout bounds each shadow call. Default DefaultShadowTimeout.
	ShadowTimeout time.Duration

	// MaxInFlightShadows bounds the shadow calls in flight; a shadow due
	// beyond it is skipped. Default DefaultMaxInFlightShadows.
	MaxInFlightShadows int
}

// Replicas is a grpc.ClientConnInterface over an explicit list of
// replicas, for generated clients (pb.NewFooClient(replicas)). Unary calls
// of hedged methods are hedged through the replica package: the primary
// goes to the replica of least expected cost, a hedge to the cheapest one
// the call has not used, never to one whose breaker is open or that is on
// probation; every attempt's outcome feeds its replica's breaker and
// latency. Other unary calls go once to the primary's replica. Streams go
// to a primary's replica, unhedged, and do not feed its breaker. Safe for
// concurrent use.
type Replicas struct {
	c     *Client
	set   *replica.Set
	names []string
	conns []grpc.ClientConnInterface
	tied  bool

	shadowTimeout time.Duration
	slots         chan struct{}
	ctx           context.Context
	cancel        context.CancelFunc
	mu            sync.Mutex // guards closed against wg.Add after Wait began
	closed        bool
	wg            sync.WaitGroup
}

// NewReplicas validates cfg and returns Replicas. Call Close when done, to
// end its shadow calls.
func NewReplicas(cfg ReplicasConfig) (*Replicas, error) {
	r := &Replicas{tied: cfg.Tied, shadowTimeout: cfg.ShadowTimeout}
	if len(cfg.Targets) == 0 {
		return nil, fmt.Errorf("%w: Targets is empty", ErrInvalid)
	}
	for i, t := range cfg.Targets {
		if t.Conn == nil {
			return nil, fmt.Errorf("%w: Targets[%d] (%q): Conn is nil", ErrInvalid, i, t.Name)
		}
		if cfg.Tied {
			if err := hostPort(fmt.Sprintf("Targets[%d].Name", i), t.Name); err != nil {
				return nil, err
			}
		}
		r.names = append(r.names, t.Name)
		r.conns = append(r.conns, t.Conn)
	}
	set, err := replica.New(r.names, cfg.Replica)
	if err != nil {
		return nil, fmt.Errorf("%w: Targets or Replica: %w", ErrInvalid, err)
	}
	r.set = set
	hc := cfg.Config
	if cfg.Tied {
		if len(cfg.Targets) < 2 {
			return nil, fmt.Errorf("%w: Tied needs at least two Targets, have %d", ErrInvalid, len(cfg.Targets))
		}
		if hc.Policy, err = tiedPolicy(cfg.TiedDelay, hc.Policy.Observer); err != nil {
			return nil, err
		}
	}
	if hc.Policy.Gate.Load == nil {
		n := float64(set.Len())
		hc.Policy.Gate.Load = func() hedge.Load {
			return hedge.Load{Unavailable: 1 - float64(set.Available(time.Now()))/n}
		}
	}
	if r.c, err = NewClient(hc); err != nil {
		return nil, err
	}
	switch {
	case r.shadowTimeout == 0:
		r.shadowTimeout = DefaultShadowTimeout
	case r.shadowTimeout < 0:
		return nil, fmt.Errorf("%w: ShadowTimeout: negative %v", ErrInvalid, r.shadowTimeout)
	}
	n := cfg.MaxInFlightShadows
	switch {
	case n == 0:
		n = DefaultMaxInFlightShadows
	case n < 0:
		return nil, fmt.Errorf("%w: MaxInFlightShadows: negative %d", ErrInvalid, n)
	}
	r.slots = make(chan struct{}, n)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// tiedPolicy is the engine's policy for tied calls, as tied.Transport's.
func tiedPolicy(delay time.Duration, obs hedge.Observer) (hedge.Policy, error) {
	switch {
	case delay == 0:
		delay = tied.DefaultDelay
	case delay < 0:
		delay = time.Nanosecond // at once, in effect
	}
	// Every call earns a whole credit and spends at most one, from a
	// reserve no concurrency can drain: no budget in effect.
	b, err := hedge.NewBudget(1, 1e9)
	if err != nil {
		return hedge.Policy{}, err
	}
	return hedge.Policy{
		Delay: delay, MaxAttempts: 2, Budget: b, Gate: hedge.Gate{Disabled: true},
		IgnoreDeadline: true, Observer: obs,
	}, nil
}

// Set returns the replica set, for its Snapshot.
func (r *Replicas) Set() *replica.Set { return r.set }

// Hedger returns the Hedger of a hedged method, as Client.Hedger does.
func (r *Replicas) Hedger(fullMethod string) *hedge.Hedger { return r.c.Hedger(fullMethod) }

// Close ends the shadow calls in flight, waits for them, and sends no more.
// It does not close the Targets' Conns. It may be called more than once.
func (r *Replicas) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return nil
}

// Invoke implements grpc.ClientConnInterface.
func (r *Replicas) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	h := r.c.hedgerFor(method)
	if h == nil {
		return r.once(ctx, method, args, reply, opts)
	}
	k, ok := newCall(r.c, method, args, reply, opts)
	if !ok {
		return r.once(ctx, method, args, reply, opts)
	}
	k.rep = &replicaCall{r: r, tied: r.tied, RouteSteering: hedge.RouteSteering{Route: r.set.Route(nil, r.tied)}}
	err := k.run(ctx, h)
	if err == nil && r.set.OnProbation() > 0 {
		r.shadow(method, k.req, k.reply)
	}
	return err
}

// once sends a call that is not hedged to the primary's replica.
func (r *Replicas) once(ctx context.Context, method string, args, reply any, opts []grpc.CallOption) error {
	i, t, ok := r.set.Pick(time.Now(), replica.Attempt{Role: replica.Primary})
	if !ok {
		return status.Error(codes.Unavailable, "hedgegrpc: no replica available")
	}
	err := r.conns[i].Invoke(ctx, method, args, reply, opts...)
	r.set.Done(t, outcome(ctx, err), time.Now())
	return err
}

// NewStream implements grpc.ClientConnInterface: the stream goes to the
// replica a primary would, unhedged. Its ticket is given back at once, as
// a cancellation that took no time: a stream's length says nothing of its
// replica's latency, and its end is the caller's to observe.
func (r *Replicas) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	now := time.Now()
	i, t, ok := r.set.Pick(now, replica.Attempt{Role: replica.Primary})
	if !ok {
		return nil, status.Error(codes.Unavailable, "hedgegrpc: no replica available")
	}
	r.set.Done(t, replica.Canceled, now)
	return r.conns[i].NewStream(ctx, desc, method, opts...)
}

// outcome judges an attempt for its replica's breaker: a status a server
// sends when it works (NotFound, InvalidArgument, ...) is a success; one
// that says it could not serve (Unavailable, Internal, Unknown, DataLoss,
// ResourceExhausted, Unimplemented, or DeadlineExceeded with time left on
// ours) a failure; our own cancellation is neutral.
func outcome(ctx context.Context, err error) replica.Outcome {
	if err == nil {
		return replica.Success
	}
	if ctx.Err() != nil {
		return replica.Canceled
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal, codes.Unknown, codes.DataLoss,
		codes.ResourceExhausted, codes.Unimplemented, codes.DeadlineExceeded:
		return replica.Failure
	case codes.Canceled:
		return replica.Canceled
	}
	return replica.Success
}

// shadow sends a copy of a hedged call just answered to a replica on
// probation, if one is due, in the background. It copies req before
// returning: the caller may reuse it.
func (r *Replicas) shadow(method string, req, reply proto.Message) {
	now := time.Now()
	i, t, ok := r.set.Pick(now, replica.Attempt{Role: replica.Shadow})
	if !ok {
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.set.Done(t, replica.Canceled, now)
		return
	}
	select {
	case r.slots <- struct{}{}:
	default:
		r.mu.Unlock()
		r.set.Done(t, replica.Canceled, now) // skipped: took no time
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	req = proto.Clone(req)
	out := reply.ProtoReflect().New().Interface()
	go func() {
		defer r.wg.Done()
		defer func() { <-r.slots }()
		ctx, cancel := context.WithTimeout(r.ctx, r.shadowTimeout)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, shadowKey, "1", hedgeKey, "1")
		err := r.conns[i].Invoke(ctx, method, req, out)
		r.set.Done(t, outcome(ctx, err), time.Now())
	}()
}

// replicaCall steers one hedged call of Replicas through the replica set
// (replica.Route): the primary by cost, a hedge the cheapest replica not
// used yet, an attempt after a failure the same but falling back on one on
// probation; a tied call's twin picked with its primary.
type replicaCall struct {
	r    *Replicas
	tied bool
	hedge.RouteSteering
	tie string // a tied call's, made with its primary
}

// Pick chooses attempt a's replica (RouteSteering's), under the engine's
// lock, and makes a tied call's tie with its primary.
func (p *replicaCall) Pick(a hedge.Attempt, used []int) (int, error) {
	i, err := p.RouteSteering.Pick(a, used)
	if err == nil && a.Index == 0 && p.Route.Tied(0) {
		p.tie = tiedwire.NewTie()
	}
	return i, err
}

// tieMetadata writes attempt a's tie metadata into kv (room for 4) if it
// is a tied copy, and returns how many strings it wrote.
func (p *replicaCall) tieMetadata(a hedge.Attempt, kv []string) int {
	if !p.Route.Tied(a.Index) {
		return 0
	}
	twin := p.Route.Replica(0) // the second copy names the primary's server
	if a.Index == 0 {
		twin, _ = p.Route.Twin()
	}
	kv[0], kv[1], kv[2], kv[3] = tieKey, p.tie, tiePeerKey, p.r.names[twin]
	return 4
}

// send sends attempt a to its replica and gives its ticket back with the
// outcome, as gRPC's status says it. A copy dropped for its twin is neutral
// and took no time: it says how soon the twin started elsewhere, not how
// this replica fares.
func (p *replicaCall) send(ctx context.Context, a hedge.Attempt, method string, req, reply any, opts []grpc.CallOption) error {
	start := time.Now()
	err := p.r.conns[a.Target].Invoke(ctx, method, req, reply, opts...)
	o, elapsed := outcome(ctx, err), time.Since(start)
	if p.tied && err != nil && Dropped(err) {
		o, elapsed = replica.Canceled, 0
	}
	p.Route.Done(a.Index, o, elapsed)
	return err
}
