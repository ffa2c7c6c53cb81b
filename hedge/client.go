package hedge

import (
	"fmt"
	"net/http"
	"time"
)

// Defaults of NewClient, which are also the lab's.
const (
	DefaultClientMaxBodyBytes = 64 << 10
	DefaultClientTimeout      = 2 * time.Second
)

// NewClient returns an http.Client over NewTransport(cfg) that hedges GET
// and HEAD requests with the lab's defaults where cfg leaves them zero: a
// 64 KiB body limit, a 2s ceiling per request, hedges included
// (Policy.Timeout), and redirects refused (ErrRedirectRefused): a hedged
// read must not wander to an address nobody configured.
func NewClient(cfg TransportConfig) (*http.Client, error) {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultClientMaxBodyBytes
	}
	if cfg.Classes == nil && cfg.Policy.Timeout == 0 {
		cfg.Policy.Timeout = DefaultClientTimeout
	}
	t, err := NewTransport(cfg)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Transport: t,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return fmt.Errorf("%w: to %s", ErrRedirectRefused, req.URL.Redacted())
		},
	}, nil
}
