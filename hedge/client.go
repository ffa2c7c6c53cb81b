package hedge

import (
	"fmt"
	"net/http"
	"time"
)

// Defaults of the client preset, which are also the lab's.
const (
	DefaultClientMaxBodyBytes = 64 << 10
	DefaultClientTimeout      = 2 * time.Second
)

// ClientConfig configures NewClient, a ready-made hedging client for reads.
type ClientConfig struct {
	// Client, when non-nil, is the client to build on: its Transport (nil
	// meaning NewBaseTransport()) sends each attempt, and its Jar and
	// Timeout are kept (a zero Timeout becomes Timeout below). It is not
	// modified.
	Client *http.Client
	// Policy for the client's Hedger. Its defaults give at most 2 attempts
	// and a 100ms observation window after the winner.
	Policy Policy
	// Targets, RotatePrimary, Accept and OnReceipt are as in TransportConfig.
	Targets       []string
	RotatePrimary bool
	Accept        func(*http.Response) error
	OnReceipt     func(*http.Request, Receipt)
	// MaxBodyBytes bounds each response body. Default 64 KiB.
	MaxBodyBytes int64
	// Timeout is the ceiling of one whole request, hedges included.
	// Default 2s.
	Timeout time.Duration
}

// NewClient returns an http.Client that hedges GET and HEAD requests with
// the lab's defaults: at most 2 attempts, a 64 KiB body limit, a 2s ceiling
// per request, 100ms of post-winner observation, and redirects refused
// (ErrRedirectRefused): a hedged read must not wander to an address nobody
// configured.
func NewClient(cfg ClientConfig) (*http.Client, error) {
	h, err := New(cfg.Policy)
	if err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultClientMaxBodyBytes
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultClientTimeout
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative client timeout %v", ErrInvalidPolicy, cfg.Timeout)
	}
	c := &http.Client{Timeout: cfg.Timeout}
	var base http.RoundTripper
	if cfg.Client != nil {
		base = cfg.Client.Transport
		c.Jar = cfg.Client.Jar
		if cfg.Client.Timeout > 0 {
			c.Timeout = cfg.Client.Timeout
		}
	}
	t, err := NewTransport(TransportConfig{
		Base:          base,
		Hedger:        h,
		Targets:       cfg.Targets,
		RotatePrimary: cfg.RotatePrimary,
		MaxBodyBytes:  cfg.MaxBodyBytes,
		Accept:        cfg.Accept,
		OnReceipt:     cfg.OnReceipt,
	})
	if err != nil {
		return nil, err
	}
	c.Transport = t
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		return fmt.Errorf("%w: to %s", ErrRedirectRefused, req.URL.Redacted())
	}
	return c, nil
}
