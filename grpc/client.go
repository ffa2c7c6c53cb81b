package hedgegrpc

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tailgate-dev/tailgate/hedge"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// DefaultNonFatalCodes are the status codes that send the hedge at once
// unless Config.NonFatalCodes says otherwise: Unavailable, the code for a
// server that could not be reached or is shedding load, which is what
// failing over is for. (gRPC Java's default is none.)
var DefaultNonFatalCodes = []codes.Code{codes.Unavailable}

// MaxMethods bounds the methods a Client keeps a Hedger for when
// Config.Hedgeable chooses them: calls of methods beyond it pass through
// unhedged.
const MaxMethods = 1024

// ErrInvalid wraps every configuration error of NewClient,
// NewReplicas and NewServer.
var ErrInvalid = errors.New("hedgegrpc: invalid config")

// Config configures the hedging of unary calls. Methods or Hedgeable must
// name at least one method: nothing is hedged by default.
type Config struct {
	// Policy is the hedging policy of every hedged method. Each method is
	// a class of its own (hedge.Classes): its own latencies, adaptive delay
	// and overload gate, since methods differ in latency; all of them draw
	// on one Budget: Policy.Budget, or, when nil, one the Client makes with
	// the defaults (10% extra attempts, burst 10). The zero Policy is the
	// engine's: an adaptive delay at p(1 − budget fraction), at most 2
	// attempts, the gate on. Beyond hedge.MaxClasses methods at once, the
	// further ones share hedge.OtherClass.
	Policy hedge.Policy

	// Methods lists the full names of the methods to hedge
	// ("/pkg.Service/Method"). Only idempotent reads belong here: every
	// attempt may run on its server.
	Methods []string

	// Hedgeable, when non-nil, decides for each method not in Methods
	// whether it is hedged. It is asked on every such call and must be
	// fast. At most MaxMethods methods are hedged through it.
	Hedgeable func(fullMethod string) bool

	// NonFatalCodes are the status codes after which the next attempt is
	// sent at once, budget permitting, as in gRPC's hedging policy
	// (nonFatalStatusCodes); any other status ends the call and is
	// returned, the attempts still running cancelled. Nil means
	// DefaultNonFatalCodes (Unavailable); an empty, non-nil slice makes
	// every status fatal, as gRPC Java's default. OK is not allowed.
	NonFatalCodes []codes.Code

	// OnReceipt, when non-nil, receives the receipt of every hedged call,
	// possibly after the call has returned, from any goroutine. See also
	// WithReceipt, for one call.
	OnReceipt func(fullMethod string, r hedge.Receipt)
}

// Client hedges unary calls (see UnaryClientInterceptor). It is safe for
// concurrent use.
type Client struct {
	classes   *hedge.Classes // a class per method
	fixed     map[string]bool
	hedgeable func(string) bool
	nonFatal  uint32 // bit c set: code c is not fatal
	onReceipt func(string, hedge.Receipt)

	mu    sync.Mutex
	lazy  sync.Map // method -> bool, as hedgeable chose
	nlazy int
}

// NewClient validates cfg and returns a Client.
func NewClient(cfg Config) (*Client, error) {
	c := &Client{
		fixed:     make(map[string]bool, len(cfg.Methods)),
		hedgeable: cfg.Hedgeable,
		onReceipt: cfg.OnReceipt,
	}
	if len(cfg.Methods) == 0 && cfg.Hedgeable == nil {
		return nil, fmt.Errorf("%w: Methods is empty and Hedgeable is nil: no method would be hedged", ErrInvalid)
	}
	var err error
	if c.classes, err = hedge.NewClasses(cfg.Policy); err != nil {
		return nil, fmt.Errorf("%w: Policy: %w", ErrInvalid, err)
	}
	nonFatal := cfg.NonFatalCodes
	if nonFatal == nil {
		nonFatal = DefaultNonFatalCodes
	}
	for _, code := range nonFatal {
		if code == codes.OK || code > codes.Unauthenticated {
			return nil, fmt.Errorf("%w: NonFatalCodes: %v is not an error code", ErrInvalid, code)
		}
		c.nonFatal |= 1 << code
	}
	for _, m := range cfg.Methods {
		if err := checkMethod(m); err != nil {
			return nil, err
		}
		if c.fixed[m] {
			return nil, fmt.Errorf("%w: Methods: %q listed twice", ErrInvalid, m)
		}
		c.fixed[m] = true
	}
	return c, nil
}

// checkMethod checks the form of a full method name: "/service/method".
func checkMethod(m string) error {
	if len(m) < 4 || m[0] != '/' {
		return fmt.Errorf("%w: Methods: %q is not a full method name (\"/pkg.Service/Method\")", ErrInvalid, m)
	}
	slash := 0
	for i := 1; i < len(m); i++ {
		if m[i] == '/' {
			slash = i
			break
		}
	}
	if slash <= 1 || slash == len(m)-1 {
		return fmt.Errorf("%w: Methods: %q is not a full method name (\"/pkg.Service/Method\")", ErrInvalid, m)
	}
	return nil
}

// Hedger returns the Hedger of a hedged method, for its Stats, or nil if
// the method is not hedged (or Hedgeable has not chosen it yet).
func (c *Client) Hedger(fullMethod string) *hedge.Hedger {
	if !c.hedged(fullMethod) {
		return nil
	}
	return c.classes.Hedger(fullMethod)
}

// Classes returns the per-method Hedgers.
func (c *Client) Classes() *hedge.Classes { return c.classes }

// hedged reports whether method's calls are hedged, as chosen so far.
func (c *Client) hedged(method string) bool {
	if c.fixed[method] {
		return true
	}
	v, ok := c.lazy.Load(method)
	return ok && v.(bool)
}

// hedgerFor returns the Hedger of method, or nil if its calls are not
// hedged.
func (c *Client) hedgerFor(method string) *hedge.Hedger {
	if c.fixed[method] {
		return c.classes.Hedger(method)
	}
	if c.hedgeable == nil {
		return nil
	}
	if v, ok := c.lazy.Load(method); ok {
		if v.(bool) {
			return c.classes.Hedger(method)
		}
		return nil
	}
	if !c.hedgeable(method) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.lazy.Load(method); !ok {
		if c.nlazy >= MaxMethods {
			return nil
		}
		c.lazy.Store(method, true)
		c.nlazy++
	}
	return c.classes.Hedger(method)
}

// fatal reports whether a status code ends a call.
func (c *Client) fatal(code codes.Code) bool {
	return code > 31 || c.nonFatal&(1<<code) == 0
}

// UnaryClientInterceptor returns an interceptor that hedges the unary
// calls of hedged methods through the ClientConn it is installed on: each
// attempt is a call of its own on that ClientConn, so its balancer picks a
// server for each (use a balancer that spreads calls, such as round_robin:
// with pick_first every attempt goes to the same server). Calls of other
// methods, calls whose messages are not protobuf messages, and streams
// pass through unhedged.
func (c *Client) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		h := c.hedgerFor(method)
		if h == nil {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		k, ok := newCall(c, method, req, reply, opts)
		if !ok {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		k.invoker, k.cc = invoker, cc
		return k.run(ctx, h)
	}
}
