package lab

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Model draws the service time of one request. Implementations must be
// deterministic given the random source, so runs are reproducible.
type Model interface {
	// Sample returns the service time of the request with the given id.
	Sample(rng *rand.Rand, id uint64) time.Duration
	// String describes the model for reports.
	String() string
}

// Constant serves every request in the same time.
type Constant time.Duration

// Sample implements Model.
func (c Constant) Sample(*rand.Rand, uint64) time.Duration { return time.Duration(c) }

func (c Constant) String() string { return fmt.Sprintf("constant %v", time.Duration(c)) }

// Straggler serves most requests in Fast and a Fraction of them in Slow,
// the shape of a replica with occasional garbage-collection pauses, queue
// build-ups or cold caches.
type Straggler struct {
	Fraction float64       // share of slow requests, in [0, 1]
	Fast     time.Duration // service time of the others
	Slow     time.Duration // service time of a straggler
}

// Sample implements Model.
func (s Straggler) Sample(rng *rand.Rand, _ uint64) time.Duration {
	if rng.Float64() < s.Fraction {
		return s.Slow
	}
	return s.Fast
}

func (s Straggler) String() string {
	return fmt.Sprintf("%g%% of requests take %v, the rest %v", 100*s.Fraction, s.Slow, s.Fast)
}
