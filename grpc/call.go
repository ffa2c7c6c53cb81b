package hedgegrpc

import (
	"context"
	"errors"

	"github.com/tailgate-dev/tailgate/hedge"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// answer is what one attempt got: a reply message of its own, and its
// own header, trailer and peer when the caller asked for them. Only the
// answer returned to the caller is copied into the caller's memory, by the
// caller's goroutine, once the engine has returned.
type answer struct {
	reply   proto.Message
	err     error
	header  metadata.MD
	trailer metadata.MD
	peer    peer.Peer
}

// asks are the caller's call options that would have every attempt write
// into the caller's memory, or call back once per attempt: the call gives
// each attempt its own and hands the returned attempt's on.
type asks struct {
	header, trailer []*metadata.MD
	peer            []*peer.Peer
	onFinish        []func(error)
	receipt         []func(hedge.Receipt)
}

func (a *asks) perAttempt() bool {
	return len(a.header)+len(a.trailer)+len(a.peer) > 0
}

// call is one hedged unary call.
type call struct {
	c      *Client
	method string
	req    proto.Message
	reply  proto.Message
	rtype  protoreflect.MessageType // reply's, read once by the caller's goroutine
	opts   []grpc.CallOption        // the caller's, less those in asks

	// hedges[i] is all that hedge i sends and receives into: a copy of
	// req, a reply of its own, call options of its own. admit makes it
	// under the engine's lock before the hedge starts, so that it is
	// complete before the call can return: a hedge may still be starting,
	// or marshalling its request, after the call has returned, when the
	// caller may reuse every message and option it passed. The primary
	// runs on the caller's goroutine, which the engine returns only after
	// it, so it reads the caller's own.
	hedges [hedge.MaxAttemptsCap]hedgeInput
	asks   asks
	mark   string // the incoming call's hedge mark, carried by the primary

	invoker grpc.UnaryInvoker // UnaryClientInterceptor's
	cc      *grpc.ClientConn
	rep     *replicaCall // Replicas' steering, nil for the interceptor

	ans0 answer // the primary's
}

type hedgeInput struct {
	req  proto.Message
	ans  *answer
	opts []grpc.CallOption
}

// newCall prepares a hedged call, or reports false if its messages are
// not protobuf messages, which it could not give each attempt its own of.
func newCall(c *Client, method string, req, reply any, opts []grpc.CallOption) (*call, bool) {
	rq, ok := message(req)
	if !ok {
		return nil, false
	}
	rp, ok := message(reply)
	if !ok {
		return nil, false
	}
	k := &call{c: c, method: method, req: rq, reply: rp, rtype: rp.ProtoReflect().Type(), opts: opts}
	for i, o := range opts {
		if !k.ask(o) {
			continue
		}
		// Copy the rest, less what the call takes over.
		k.opts = append(make([]grpc.CallOption, 0, len(opts)-1), opts[:i]...)
		for _, o := range opts[i+1:] {
			if !k.ask(o) {
				k.opts = append(k.opts, o)
			}
		}
		break
	}
	return k, true
}

// ask takes over o if it is an option the call handles itself, and
// reports whether it did.
func (k *call) ask(o grpc.CallOption) bool {
	a := &k.asks
	switch o := o.(type) {
	case grpc.HeaderCallOption:
		a.header = append(a.header, o.HeaderAddr)
	case grpc.TrailerCallOption:
		a.trailer = append(a.trailer, o.TrailerAddr)
	case grpc.PeerCallOption:
		a.peer = append(a.peer, o.PeerAddr)
	case grpc.OnFinishCallOption:
		a.onFinish = append(a.onFinish, o.OnFinish)
	case receiptOption:
		a.receipt = append(a.receipt, o.f)
	default:
		return false
	}
	return true
}

// message returns v as a protobuf message (APIv2), if it is one.
func message(v any) (proto.Message, bool) {
	switch m := v.(type) {
	case proto.Message:
		return m, m != nil
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(m), m != nil
	}
	return nil, false
}

// run hedges the call under h and returns its error, the winner's reply
// merged into the caller's.
func (k *call) run(ctx context.Context, h *hedge.Hedger) error {
	k.mark = incomingMark(ctx)
	op := hedge.Op[*answer]{
		Call:     k.attempt,
		Accept:   k.accept,
		Steering: k,
	}
	if k.c.onReceipt != nil || len(k.asks.receipt) > 0 {
		op.OnReceipt = k.deliver
	}
	if k.rep != nil {
		op.Targets = k.rep.r.names
	}
	v, err := hedge.Do(ctx, h, op)
	if k.rep != nil {
		k.rep.Route.Finish() // a tied call's twin, held for a second copy never sent
	}
	return k.finish(ctx, v, err)
}

// Pick implements hedge.Steering: through the replica set for Replicas
// (see replicaCall.Pick), to the one ClientConn for the interceptor. A
// hedge's input is made here (see hedges), under the engine's lock, just
// before it is launched.
func (k *call) Pick(a hedge.Attempt, used []int) (int, error) {
	i := 0
	if k.rep != nil {
		var err error
		if i, err = k.rep.Pick(a, used); err != nil {
			return -1, err
		}
	}
	if a.Index > 0 {
		ans := &answer{reply: k.rtype.New().Interface()}
		k.hedges[a.Index] = hedgeInput{req: proto.Clone(k.req), ans: ans, opts: k.optionsFor(ans, true)}
	}
	return i, nil
}

// Done implements hedge.Steering: Replicas' attempts give their tickets
// back as they end (see replicaCall.send), with gRPC's own judgement of
// the status.
func (k *call) Done(hedge.Attempt, hedge.Result) {}

// optionsFor returns the call options of the attempt that answers into
// ans: the caller's, and the header, trailer and peer options it asked
// for, aimed at ans. Unless private, it returns the caller's own slice
// when nothing needs adding.
func (k *call) optionsFor(ans *answer, private bool) []grpc.CallOption {
	a := &k.asks
	if !private && !a.perAttempt() {
		return k.opts
	}
	opts := make([]grpc.CallOption, len(k.opts), len(k.opts)+len(a.header)+len(a.trailer)+len(a.peer))
	copy(opts, k.opts)
	if len(a.header) > 0 {
		opts = append(opts, grpc.Header(&ans.header))
	}
	if len(a.trailer) > 0 {
		opts = append(opts, grpc.Trailer(&ans.trailer))
	}
	if len(a.peer) > 0 {
		opts = append(opts, grpc.Peer(&ans.peer))
	}
	return opts
}

// attempt sends one attempt, into a reply message of its own.
func (k *call) attempt(ctx context.Context, a hedge.Attempt) (*answer, error) {
	var ans *answer
	var req proto.Message
	var opts []grpc.CallOption
	if a.Index > 0 {
		in := &k.hedges[a.Index]
		ans, req, opts = in.ans, in.req, in.opts
	} else {
		ans, req = &k.ans0, k.req
		ans.reply = k.rtype.New().Interface()
		opts = k.optionsFor(ans, false)
	}
	ctx = k.stamp(ctx, a)
	if k.rep != nil {
		ans.err = k.rep.send(ctx, a, k.method, req, ans.reply, opts)
	} else {
		ans.err = k.invoker(ctx, k.method, req, ans.reply, k.cc, opts...)
	}
	return ans, ans.err
}

// hedgeValues are the values of hedgeKey and previousAttemptsKey, by
// attempt index.
var hedgeValues = [hedge.MaxAttemptsCap]string{"0", "1", "2", "3", "4"}

// stamp adds attempt a's metadata to its context: a hedge carries its
// index as the hedge mark and, as gRPC's hedging does, the number of
// attempts before it; a primary carries the incoming call's mark, if any,
// so that a hedge from an earlier hop stays marked; a tied copy its tie.
func (k *call) stamp(ctx context.Context, a hedge.Attempt) context.Context {
	var kv [8]string
	n := 0
	switch {
	case a.Index > 0:
		kv[0], kv[1], kv[2], kv[3] = previousAttemptsKey, hedgeValues[a.Index], hedgeKey, hedgeValues[a.Index]
		n = 4
	case k.mark != "":
		kv[0], kv[1] = hedgeKey, k.mark
		n = 2
	}
	if k.rep != nil {
		n += k.rep.tieMetadata(a, kv[n:])
	}
	if n == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv[:n]...)
}

// accept judges an attempt: a reply wins; a fatal status wins too, in
// that it ends the call and is returned as it is; a non-fatal one sends
// the next attempt at once; a tied copy dropped for its twin is no answer.
func (k *call) accept(_ *answer, err error) error {
	if err == nil {
		return nil
	}
	if k.rep != nil && k.rep.tied && Dropped(err) {
		return errDropped
	}
	if k.c.fatal(status.Code(err)) {
		return nil
	}
	return err
}

// finish hands the engine's outcome to the caller: the winner's reply,
// header, trailer and peer, or the status that ends the call.
func (k *call) finish(ctx context.Context, v *answer, err error) error {
	if v != nil {
		for _, p := range k.asks.header {
			*p = v.header
		}
		for _, p := range k.asks.trailer {
			*p = v.trailer
		}
		for _, p := range k.asks.peer {
			*p = v.peer
		}
	}
	switch {
	case err == nil:
		proto.Reset(k.reply)
		proto.Merge(k.reply, v.reply)
	case v != nil && err == v.err:
		// A fatal status, returned as the server sent it.
	case errors.Is(err, hedge.ErrNoTarget):
		err = status.Error(codes.Unavailable, "hedgegrpc: no replica available")
	case v == nil:
		// The caller's context ended, or the policy's Timeout passed.
		err = status.FromContextError(err).Err()
	case k.rep != nil && k.rep.tied && Dropped(v.err):
		err = status.Error(codes.Unavailable, "hedgegrpc: no answer: every copy was dropped for its twin")
	default:
		err = v.err // the last attempt's status
	}
	for _, f := range k.asks.onFinish {
		f(err)
	}
	return err
}

// deliver hands the call's receipt to whoever asked for it.
func (k *call) deliver(r hedge.Receipt) {
	if k.c.onReceipt != nil {
		k.c.onReceipt(k.method, r)
	}
	for _, f := range k.asks.receipt {
		f(r)
	}
}
