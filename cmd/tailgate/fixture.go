package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tailgate-dev/tailgate/lab/fixture"
)

const fixtureSynopsis = `Runs one controlled replica on a loopback address: GET answers JSON
{"value": "<name>:<id>"} after a latency drawn from -model (the "id" query
parameter keys it), and /stats reports its counters as JSON (started,
completed, completedAfterCancel, cancellationsObserved, hedges, queued...).
By default it keeps working after a client cancels, as real servers do.

Models (-model), as kind:key=value,...:
  const:5ms
  lognormal:p50=8ms,p99=90ms
  straggler:frac=0.05,fast=1ms,slow=40ms
  slowids:ids=3/17/42,fast=1ms,slow=80ms[,primary]   (primary: a hedge is fast)
  stalls:every=1s,for=100ms,base=const:1ms            (base last; any model)
Durations are at most 1m.`

func runFixture(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("fixture", fixtureSynopsis, stderr)
	listen := fs.String("listen", "127.0.0.1:8081", "loopback address to listen on")
	name := fs.String("name", "fixture", "name in answers and reports")
	model := fs.String("model", "lognormal:p50=8ms,p99=90ms", "latency model (see above)")
	seed := fs.Uint64("seed", 1, "seed of the latency draws")
	capacity := fs.Int("capacity", 0, "requests served at once; the rest wait in a FIFO queue (0: unlimited)")
	queue := fs.Int("queue-limit", fixture.DefaultQueueLimit, "most requests waiting; beyond it 503 at once")
	lowHedges := fs.Bool("deprioritize-hedges", false, "serve queued hedge attempts only when no primary waits")
	stop := fs.Bool("stop-on-cancel", false, "stop working when the client cancels (default: keep working)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	m, err := fixture.ParseModel(*model)
	if err != nil {
		return usageError(stderr, "fixture", err)
	}
	cfg := fixture.Config{Name: *name, Model: m, Seed: *seed, Addr: *listen,
		Capacity: *capacity, QueueLimit: *queue, DeprioritizeHedges: *lowHedges, StopOnCancel: *stop}
	if err := cfg.Validate(); err != nil {
		return usageError(stderr, "fixture", err)
	}
	f, err := fixture.Start(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "tailgate fixture: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "fixture %s serving %s at %s (stats at %s/stats)\n", *name, m, f.URL(), f.URL())
	<-ctx.Done()
	if err := f.Close(); err != nil {
		fmt.Fprintf(stderr, "tailgate fixture: %v\n", err)
		return exitError
	}
	return exitOK
}
