// Command saturated measures the gateway on replicas that are saturated
// rather than variable: two loopback replicas (lab fixtures) that take
// 30ms for every read and serve two at a time each (a FIFO queue for the
// rest), read through the gateway in-process by 16 closed-loop clients,
// which keeps the replicas' queues full. Every read is late, so every read
// wants a hedge, and none would help: the overload gate must hold them
// back. It runs without hedging, with the default (adaptive) delay and
// with a fixed 10ms delay, and prints one JSON line each: goodput, p99,
// backend attempts per read (the replicas' own counts), the hedges sent
// and the gate's state at the end.
//
//	go run ./bench/saturated [-duration 20s] [-clients 16]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/h1server"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
)

func main() {
	duration := flag.Duration("duration", 20*time.Second, "how long each setting runs (at most 5m)")
	clients := flag.Int("clients", 16, "closed-loop clients (1 to 1000)")
	flag.Parse()
	if *duration <= 0 || *duration > 5*time.Minute || *clients < 1 || *clients > 1000 {
		fmt.Fprintln(os.Stderr, "saturated: -duration must be within (0, 5m] and -clients within [1, 1000]")
		os.Exit(2)
	}
	settings := []struct {
		name   string
		policy hedge.Policy
	}{
		{"no hedging", hedge.Policy{MaxAttempts: 1}},
		{"adaptive delay (default)", hedge.Policy{}},
		{"fixed 10ms delay", hedge.Policy{Delay: 10 * time.Millisecond}},
	}
	enc := json.NewEncoder(os.Stdout)
	for _, s := range settings {
		line, err := run(s.name, s.policy, *duration, *clients)
		if err != nil {
			fmt.Fprintln(os.Stderr, "saturated:", err)
			os.Exit(1)
		}
		enc.Encode(line)
	}
}

type result struct {
	Setting string `json:"setting"`
	load.Summary
	AttemptsPerRead float64 `json:"backendAttemptsPerRead"`
	Hedges          int64   `json:"hedges"`
	Gate            string  `json:"gate"`
}

func run(name string, p hedge.Policy, d time.Duration, clients int) (*result, error) {
	var fs []*fixture.Fixture
	defer func() {
		for _, f := range fs {
			f.Close()
		}
	}()
	for i := range 2 {
		f, err := fixture.Start(fixture.Config{Name: "replica-" + strconv.Itoa(i), Model: fixture.Constant(30 * time.Millisecond),
			Seed: uint64(i + 1), Capacity: 2})
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	g, err := gateway.New(gateway.Config{Backends: []string{fs[0].URL(), fs[1].URL()}, Policy: p})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := h1server.Like(g.Server(gateway.ServerConfig{}), g) // as tailgate serve serves plain-HTTP clients
	go srv.Serve(ln)
	defer srv.Close()
	client := &http.Client{Transport: hedge.NewBaseTransport(), Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	url := "http://" + ln.Addr().String() + "/item?id="
	start := time.Now()
	// Closed loop: as many reads as the clients can make in d; those cut
	// off when d ends are left out.
	most := clients * (int(d/(30*time.Millisecond)) + 1) // no read takes less than 30ms
	outs := load.Generate(ctx, load.Config{Requests: most, Concurrency: clients}, func(ctx context.Context, i int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+strconv.Itoa(i), nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	elapsed := time.Since(start)
	var done []load.Outcome
	for _, o := range outs {
		if o.Err == nil || !errors.Is(o.Err, context.DeadlineExceeded) {
			done = append(done, o) // the reads the end of the run did not cut off
		}
	}
	var gate string
	for _, c := range g.Classes().List() { // one class: every read is GET /item
		gate = c.Hedger.Stats().Gate.String()
	}
	for _, f := range fs {
		if err := f.Settle(context.Background()); err != nil {
			return nil, err
		}
	}
	started := fs[0].Stats().Started + fs[1].Stats().Started
	primaries, hedges := exp.GatewayAttempts(g)
	r := &result{Setting: name, Summary: load.Summarize(done, elapsed), Hedges: hedges, Gate: gate}
	if primaries > 0 {
		r.AttemptsPerRead = float64(started) / float64(primaries)
	}
	return r, nil
}
