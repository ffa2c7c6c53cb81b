package hedgegrpc

import (
	"context"
	"fmt"
	"strings"

	"github.com/tailgate-dev/tailgate/hedge"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The metadata keys of the wire protocol, documented as strings in
// docs/library.md (gRPC) for servers in any language; a Go server asks
// IsHedge, and a client Dropped.
const (
	// hedgeKey marks a hedge attempt with its index (1 for the first
	// hedge): hedge.HedgeHeader's meaning, in gRPC metadata, so servers may
	// deprioritise or count duplicate work (see Server). A primary carries
	// it only if the call it is made for (the incoming call of the
	// context) carried it: a hedge from an earlier hop stays marked.
	hedgeKey = "tailgate-hedge"

	// previousAttemptsKey is carried by every hedge with the number of
	// attempts sent before it, as gRPC's hedging design (A6) says.
	previousAttemptsKey = "grpc-previous-rpc-attempts"

	// tieKey and tiePeerKey carry a tied copy's tie identity and its twin's
	// server (host:port), as Tailgate-Tie and Tailgate-Tie-Peer do over
	// HTTP. tieTokenKey carries ServerConfig.CancelToken on cancels.
	tieKey      = "tailgate-tie"
	tiePeerKey  = "tailgate-tie-peer"
	tieTokenKey = "tailgate-tie-token"

	// shadowKey marks a shadow call: a duplicate of an answered call sent
	// to a replica on probation only to measure it (see ReplicasConfig).
	shadowKey = "tailgate-shadow"
)

// errorDomain and reasonTieDropped make up the errdetails.ErrorInfo that a
// Server attaches to its answer to a tied copy it dropped because its twin
// started on another server (status Unavailable). Dropped tells such
// answers apart; they are never the result of a tied call.
const (
	errorDomain      = "tailgate.dev"
	reasonTieDropped = "TIE_DROPPED"
)

// IsHedge reports whether the incoming call of ctx, on a server, is marked
// as a hedge (tailgate-hedge with a value other than "" or "0").
func IsHedge(ctx context.Context) bool {
	return incomingMark(ctx) != ""
}

// incomingMark returns the hedge mark of ctx's incoming call, or "".
func incomingMark(ctx context.Context) string {
	v := metadata.ValueFromIncomingContext(ctx, hedgeKey)
	if len(v) == 0 || v[0] == "" || v[0] == "0" {
		return ""
	}
	return v[0]
}

// OnReceipt returns a call option that hands the receipt of this call, if
// it is hedged, to f. f may run after the call returns, in another
// goroutine. A call that is not hedged has no receipt.
func OnReceipt(f func(hedge.Receipt)) grpc.CallOption {
	return receiptOption{f: f}
}

type receiptOption struct {
	grpc.EmptyCallOption // gRPC ignores it where the call passes through
	f                    func(hedge.Receipt)
}

// Dropped reports whether err is a Server's answer to a tied copy it
// dropped for its twin: such an answer says nothing about the call, and a
// tied call never returns it.
func Dropped(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable || len(st.Proto().GetDetails()) == 0 {
		return false
	}
	for _, d := range st.Details() {
		if e, ok := d.(*errdetails.ErrorInfo); ok && e.GetDomain() == errorDomain && e.GetReason() == reasonTieDropped {
			return true
		}
	}
	return false
}

// errDropped is the acceptance verdict on a dropped copy: not an answer.
var errDropped = fmt.Errorf("hedgegrpc: copy dropped for its twin: %w", hedge.ErrNotAnAnswer)

// droppedStatus is a Server's answer to a copy dropped for its twin; when
// is "queued" or "arrival".
func droppedStatus(when string) *status.Status {
	st, err := status.New(codes.Unavailable, "hedgegrpc: tied copy dropped ("+when+"): its twin started on another server").
		WithDetails(&errdetails.ErrorInfo{Domain: errorDomain, Reason: reasonTieDropped, Metadata: map[string]string{"when": when}})
	if err != nil {
		panic(err) // an ErrorInfo always marshals
	}
	return st
}

// hostPort checks that s is a host:port address with a port in 1-65535.
func hostPort(field, s string) error {
	i := strings.LastIndexByte(s, ':')
	bad := i <= 0 || i == len(s)-1 || strings.ContainsAny(s, "/?#@ ")
	if !bad {
		port := s[i+1:]
		n := 0
		for _, c := range port {
			if c < '0' || c > '9' || n > 65535 {
				bad = true
				break
			}
			n = n*10 + int(c-'0')
		}
		bad = bad || n < 1 || n > 65535
	}
	if bad {
		return fmt.Errorf("%w: %s: %q is not a host:port address", ErrInvalid, field, s)
	}
	return nil
}
