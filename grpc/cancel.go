package hedgegrpc

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/tied"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Cross-server cancellation goes over gRPC, between the ports the servers
// already serve: tied.Server sends each cancel as an HTTP request to its
// peer's cancel endpoint through its CancelTransport, which here is
// cancelSender, a call of CancelMethod on the peer; the peer's Server
// serves that method by handing tied.Server's cancel endpoint the same
// request. The protocol's rules (allow-listed peers, token, bounds,
// outcomes) stay tied's, in one place.

// Register registers the Server's cancel method (CancelMethod) on a
// grpc.Server, so that its peers can cancel the copies queued here.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	r.RegisterService(&cancelService, s)
}

// canceller is what the cancel service's handler needs of its server.
type canceller interface {
	serveCancel(ctx context.Context, tie *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

var cancelService = grpc.ServiceDesc{
	ServiceName: "tailgate.tied.v1.Tie",
	HandlerType: (*canceller)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Cancel",
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			c := srv.(canceller)
			if ic == nil {
				return c.serveCancel(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: CancelMethod}
			return ic(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return c.serveCancel(ctx, req.(*wrapperspb.StringValue))
			})
		},
	}},
	Metadata: "tailgate/tied/v1/tie.proto",
}

// serveCancel applies a peer's cancel through tied.Server's endpoint.
func (s *Server) serveCancel(ctx context.Context, tie *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	h := make(http.Header, 1)
	if tok := metadata.ValueFromIncomingContext(ctx, tieTokenKey); len(tok) > 0 {
		h[tiedwire.TokenHeader] = tok
	}
	u := &url.URL{Path: tied.DefaultCancelPath, RawQuery: "tie=" + tie.GetValue()}
	r := (&http.Request{Method: http.MethodPost, URL: u, Header: h}).WithContext(ctx)
	var c serverCall
	s.h.ServeHTTP(&c, r)
	switch c.code {
	case http.StatusNoContent:
		return wrapperspb.String(c.hdr.Get(tiedwire.CancelOutcomeHeader)), nil
	case http.StatusForbidden:
		return nil, status.Error(codes.PermissionDenied, "hedgegrpc: cancel token missing or wrong")
	}
	return nil, status.Error(codes.InvalidArgument, "hedgegrpc: cancel needs a valid tie")
}

// cancelSender is tied.Server's CancelTransport: it sends each cancel as a
// call of CancelMethod to the peer, and answers as the peer's endpoint
// would have.
type cancelSender struct{ s *Server }

func (cs cancelSender) RoundTrip(req *http.Request) (*http.Response, error) {
	conn := cs.s.peers[req.URL.Host]
	if conn == nil {
		return nil, errUnknownPeer // tied sends only to Peers: unreachable
	}
	tie, _ := strings.CutPrefix(req.URL.RawQuery, "tie=")
	ctx := req.Context()
	if tok := req.Header.Get(tiedwire.TokenHeader); tok != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, tieTokenKey, tok)
	}
	out := new(wrapperspb.StringValue)
	code := http.StatusNoContent
	if err := conn.Invoke(ctx, CancelMethod, wrapperspb.String(tie), out); err != nil {
		switch status.Code(err) {
		case codes.PermissionDenied:
			code = http.StatusForbidden
		case codes.InvalidArgument:
			code = http.StatusBadRequest
		default:
			return nil, err
		}
	}
	resp := &http.Response{
		StatusCode: code, Header: make(http.Header, 1), Body: http.NoBody, Request: req,
		Proto: "HTTP/2.0", ProtoMajor: 2,
	}
	if code == http.StatusNoContent {
		resp.Header.Set(tiedwire.CancelOutcomeHeader, out.GetValue())
	}
	return resp, nil
}
