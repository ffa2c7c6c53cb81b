package tied

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/target"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/replica"
)

// DefaultDelay is how long a Transport waits before sending the second copy:
// about twice a network delay inside a data centre, as in The Tail at Scale.
const DefaultDelay = time.Millisecond

// TransportConfig configures a Transport. Targets is required.
type TransportConfig struct {
	// Base sends each copy. Nil means hedge.NewBaseTransport().
	Base http.RoundTripper

	// Targets are the base URLs of at least two interchangeable servers
	// running Server middleware ("http://10.0.0.1:8080", optionally with a
	// path prefix), on different hosts or ports. Copies are steered over a
	// replica.Set of them in tied mode (replica.Route): the first copy to a
	// server by latency and load, its twin, picked with it, to the fastest
	// other; each copy names the other's server (its scheme and host, as
	// the servers' Peers must list it) in Tailgate-Tie-Peer.
	Targets []string

	// Delay is how long to wait for the first copy before sending the
	// second; if the first has answered acceptably by then, the second is
	// never sent. Default DefaultDelay (1ms). Negative sends both at once
	// (in effect: 1ns apart, the engine's smallest fixed delay).
	Delay time.Duration

	// MaxBodyBytes bounds each response body, which is read in full before
	// a winner is chosen. Default hedge.DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64

	// Accept decides whether a complete response wins: nil means it does,
	// an error says why not. Nil means a final status (200 or more) below
	// 500. A response dropped for its twin (see Dropped) never wins,
	// whatever Accept says; Accept is not asked about it. Accept may run
	// concurrently for both copies.
	Accept func(*http.Response) error

	// SafeMethods lists methods besides GET and HEAD that may be sent
	// twice; other requests go once, untied, to the first target. A
	// request with a body is tied only if it has GetBody.
	SafeMethods []string

	// OnReceipt, when non-nil, receives each tied request's receipt from
	// the hedge engine (hedge.WithReceipt works too).
	OnReceipt func(*http.Request, hedge.Receipt)

	// Observer, when non-nil, sees the engine's events, for metrics.
	Observer hedge.Observer
}

// Transport is an http.RoundTripper that sends tied requests: two copies of
// each request, to two different targets, each carrying the same tie
// identity (Tailgate-Tie) and its twin's server (Tailgate-Tie-Peer), the second one
// Delay after the first unless the first has already answered acceptably.
// The first acceptable answer wins; the other copy is cancelled and its body
// closed. Meanwhile the servers' middleware (Server) cancels between
// themselves: whichever copy starts first has the other dropped from its
// queue, so that the work usually runs once.
//
// It is built on the hedge engine (hedge.Transport) with a fixed delay, two
// attempts and no budget or gate: both copies of every request are meant to
// be sent. The second copy carries hedge.HedgeHeader like any hedge. If the
// first copy fails before the second is sent, the second goes at once and
// untied (nothing is left to cancel). A tied request is not a retry,
// though: if the copy that started fails after its twin was dropped, the
// failure is the answer (the last answer is returned when none is
// acceptable, as hedge.Transport does). A request the engine would not send
// twice (see SafeMethods) goes once, untied. Receipts, bounded bodies and
// loser cancellation are the engine's; breakers and latency, the
// replica.Set's. Safe for concurrent use.
type Transport struct {
	ht      *hedge.Transport
	base    http.RoundTripper
	set     *replica.Set
	origins []string // per target: scheme://host, what tiedwire.PeerHeader carries
}

// NewTransport validates cfg and returns a Transport.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	if len(cfg.Targets) < 2 {
		return nil, fmt.Errorf("%w: tied requests need at least two targets, have %d", ErrInvalid, len(cfg.Targets))
	}
	t := &Transport{base: cfg.Base}
	seen := make(map[string]bool, len(cfg.Targets))
	for _, s := range cfg.Targets {
		u, err := target.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("%w: target %w", ErrInvalid, err) // err names the target
		}
		origin := u.Scheme + "://" + u.Host
		if seen[origin] {
			// Both copies on one server could not cancel each other.
			return nil, fmt.Errorf("%w: target %q: another target is on the same server %s", ErrInvalid, s, origin)
		}
		seen[origin] = true
		t.origins = append(t.origins, origin)
	}
	delay := cfg.Delay
	switch {
	case delay == 0:
		delay = DefaultDelay
	case delay < 0:
		delay = time.Nanosecond // at once, in effect
	}
	// Every request earns a whole credit and spends at most one, from a
	// reserve no concurrency can drain: no budget in effect.
	budget, err := hedge.NewBudget(1, 1e9)
	if err != nil {
		return nil, err
	}
	if t.base == nil {
		t.base = hedge.NewBaseTransport()
	}
	if t.set, err = replica.New(cfg.Targets, replica.Config{}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	t.ht, err = hedge.NewTransport(hedge.TransportConfig{
		Base: t.base,
		Policy: hedge.Policy{
			Delay:          delay,
			MaxAttempts:    2,
			Budget:         budget,
			Gate:           hedge.Gate{Disabled: true},
			IgnoreDeadline: true,
			Observer:       cfg.Observer,
		},
		// A fixed delay learns nothing: one class.
		Class:        func(*http.Request) string { return "tied" },
		Replicas:     t.set,
		MaxBodyBytes: cfg.MaxBodyBytes,
		Accept:       Accept(cfg.Accept),
		SafeMethods:  cfg.SafeMethods,
		OnReceipt:    cfg.OnReceipt,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return t, nil
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A request the engine passes through goes once: untied.
	p := &pair{RouteSteering: hedge.RouteSteering{Route: t.set.Route(nil, t.ht.Hedges(req))}, origins: t.origins}
	resp, err := t.ht.RoundTripWith(req, nil, p)
	p.Route.Finish()
	if err == nil || resp == nil {
		return resp, err
	}
	// No answer was accepted; resp is the last refused.
	if Dropped(resp) {
		// Every copy was dropped (the engine returns any other failure
		// before a dropped answer, which is not an answer): a dropped
		// answer is never the result.
		resp.Body.Close()
		return nil, fmt.Errorf("%w: the only answer was a copy dropped for its twin", ErrNoAnswer)
	}
	return resp, nil // the server's answer, though not acceptable
}

// ErrNoAnswer is returned when the only answers to a tied request were
// copies dropped for their twins (a dropped answer is never returned as
// the result). When the copy that ran failed, its error is returned.
var ErrNoAnswer = errors.New("tied: no answer")

// CloseIdleConnections closes the idle connections of Base, if it has such
// a method.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Replicas returns the replica set the copies are steered over.
func (t *Transport) Replicas() *replica.Set { return t.set }

// pair is one tied request: its identity and its route, which picks the
// twin with the primary. It steers the engine (hedge.Steering) and stamps
// each copy with its tie headers.
type pair struct {
	id string // made as the first copy's target is picked
	hedge.RouteSteering
	origins []string
}

// Pick implements hedge.Steering.
func (p *pair) Pick(a hedge.Attempt, used []int) (int, error) {
	if a.Index == 0 {
		p.id = tiedwire.NewTie()
	}
	return p.RouteSteering.Pick(a, used)
}

// Rewrite stamps a tied copy with the tie and its twin's server; any other
// request goes without tie headers, even if the caller's had some (a
// request that is not tied must not cancel anything).
func (p *pair) Rewrite(a hedge.Attempt, out *http.Request) {
	tied := p.Route.Tied(a.Index)
	if !tied && len(out.Header[tiedwire.TieHeader]) == 0 && len(out.Header[tiedwire.PeerHeader]) == 0 {
		return
	}
	if !a.IsHedge() {
		// The primary's header map is the caller's.
		out.Header = out.Header.Clone()
		if out.Header == nil {
			out.Header = make(http.Header, 2)
		}
	}
	if !tied {
		delete(out.Header, tiedwire.TieHeader)
		delete(out.Header, tiedwire.PeerHeader)
		return
	}
	peer := p.Route.Replica(0) // the second copy names the primary's server
	if a.Index == 0 {
		peer, _ = p.Route.Twin()
	}
	out.Header[tiedwire.TieHeader] = []string{p.id}
	out.Header[tiedwire.PeerHeader] = []string{p.origins[peer]}
}
