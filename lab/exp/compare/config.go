package compare

import (
	"fmt"
	"net/url"
	"time"

	"github.com/tailgate-dev/tailgate/internal/target"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
)

// Config configures the compare experiment. Zero fields take the
// defaults shown.
type Config struct {
	// Samples is the number of reads per side. Default 200; at most
	// MaxSamples.
	Samples int
	// Delay is the hedge delay. Default 10ms; at most a minute.
	Delay time.Duration
	// Rate is the offered load per second (open loop). Default 20; at most
	// maxRate.
	Rate float64
	// Primary and Secondary are the endpoints to compare (full URLs that
	// answer GET with 200 and JSON {"value": ...}). Each is read at its
	// own path and query, with the read's "id" added to the query. Empty
	// means two fixtures on 127.0.0.1: a primary taking 80ms and a
	// secondary 5ms.
	Primary, Secondary string
	// Seed makes arrivals (and fixtures) reproducible. Default 1.
	Seed uint64
	// Progress, when non-nil, is told how many reads of both sides have
	// completed, out of total = 2×Samples: about every tenth of a side
	// while it runs, and as each side ends. Calls do not overlap, done
	// never decreases, and done == total only in the last call.
	Progress func(done, total int)
}

// Limits of a compare run.
const (
	MaxSamples = 100_000
	maxRate    = 10_000
)

// Defaults returns the configuration a zero Config runs with.
func Defaults() Config { return Config{Samples: 200, Delay: 10 * time.Millisecond, Rate: 20, Seed: 1} }

func (cfg Config) withDefaults() Config {
	d := Defaults()
	exp.Default(&cfg.Samples, d.Samples)
	exp.Default(&cfg.Delay, d.Delay)
	exp.Default(&cfg.Rate, d.Rate)
	exp.Default(&cfg.Seed, d.Seed)
	return cfg
}

// Validate checks cfg as given, with its defaults filled in (Run fills
// them first): a zero where a default goes is an error here. Its errors
// wrap exp.ErrConfig.
func (cfg Config) Validate() error {
	c := exp.NewChecker("compare")
	exp.Within(c, "samples", cfg.Samples, 1, MaxSamples)
	exp.Above(c, "delay-ms", load.Ms(cfg.Delay), 0, load.Ms(time.Minute))
	exp.Above(c, "rate", cfg.Rate, 0, maxRate)
	c.Check((cfg.Primary == "") == (cfg.Secondary == ""), "", nil, "primary and secondary go together: give both endpoints, or neither (fixtures)")
	for _, e := range []struct{ field, url string }{{"primary", cfg.Primary}, {"secondary", cfg.Secondary}} {
		if e.url != "" {
			_, err := parseEndpoint(e.url)
			c.Check(err == nil, e.field, e.url, "is not an endpoint: %v", err)
		}
	}
	return c.Err()
}

// endpoint is a URL compared: read at its own path and query.
type endpoint struct {
	url *url.URL
	// target is the URL without its query, as a hedge target: it names
	// the endpoint in receipts.
	target string
}

// parseEndpoint checks a full URL given to compare; errors name it as given.
func parseEndpoint(s string) (endpoint, error) {
	u, err := url.Parse(s)
	if err != nil {
		return endpoint{}, fmt.Errorf("lab: endpoint %q: %w", s, err)
	}
	t := *u
	t.RawQuery, t.ForceQuery = "", false
	base, err := target.Parse(t.String())
	if err != nil {
		return endpoint{}, fmt.Errorf("lab: endpoint %q: %w", s, err)
	}
	return endpoint{url: u, target: base.String()}, nil
}
