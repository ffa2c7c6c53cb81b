package classes

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
)

// The conditions, in the order they run.
const (
	condDirect    = "direct"                // one replica, read directly
	condReference = "per-endpoint p90"      // the experiment's own proxy
	condOneClass  = "gateway, one class"    // every read one class
	condClasses   = "gateway, classes"      // the default: method and path template
	condRoutes    = "gateway, routes fixed" // a route per kind, a fixed delay each
)

var conditions = []string{condDirect, condReference, condOneClass, condClasses, condRoutes}

// endpoints are the two kinds of read, as their paths.
var endpoints = []string{"/item", "/search"}

// Run runs the experiment: each condition reads the same arrivals, the
// same ids, from the same two fixtures.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Header: exp.Start("classes", cfg.Seed), Config: cfg}
	var rig exp.Rig
	defer rig.Close()
	fixtures, err := startFixtures(&rig, cfg)
	if err != nil {
		return nil, err
	}
	urls := []string{fixtures[0].URL(), fixtures[1].URL()}
	paths := drawPaths(cfg)
	client := rig.GatewayClient(10 * time.Second)
	rep.Conditions = make([]Condition, len(conditions))
	err = exp.Run(ctx, &rep.Header, len(conditions), cfg.Progress, func(i int) error {
		var front exp.Rig // the condition's, stopped as it ends
		defer front.Close()
		url, attempts, err := startCondition(&front, conditions[i], cfg, urls)
		if err != nil {
			return err
		}
		rep.Conditions[i], err = runCondition(ctx, conditions[i], cfg, url, paths, fixtures, client, attempts)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// startFixtures starts the two replicas on rig: each path with its own
// model, and each replica with its own stragglers among the ids.
func startFixtures(rig *exp.Rig, cfg Config) ([]*fixture.Fixture, error) {
	var fs []*fixture.Fixture
	for i, name := range []string{"replica-a", "replica-b"} {
		f, err := rig.Start(fixture.Config{
			Name: name, Seed: cfg.Seed + uint64(i),
			Model: fixture.Constant(cfg.Item.Fast),
			Paths: map[string]fixture.Model{
				"/item":   slowIDs(cfg, name, "item", cfg.Item),
				"/search": slowIDs(cfg, name, "search", cfg.Search),
			},
		})
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// slowIDs is replica's model of one kind of read: its own share of the
// ids, chosen by a hash of the replica, the kind and the id, slow.
func slowIDs(cfg Config, replica, kind string, k Kind) fixture.SlowIDs {
	m := fixture.SlowIDs{Fast: k.Fast, Slow: k.Slow}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s %s", replica, kind)
	rng := rand.New(rand.NewPCG(cfg.Seed, h.Sum64()))
	for id := range cfg.IDs {
		if rng.Float64() < k.SlowShare {
			m.IDs = append(m.IDs, uint64(id))
		}
	}
	return m
}

// drawPaths draws every read's path and id.
func drawPaths(cfg Config) []string {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x636c6173736573)) // "classes"
	out := make([]string, cfg.Reads)
	for i := range out {
		path := "/item"
		if rng.Float64() < cfg.SearchShare {
			path = "/search"
		}
		out[i] = path + "?id=" + strconv.Itoa(rng.IntN(cfg.IDs))
	}
	return out
}

// startCondition serves the condition in front of the replicas, on rig,
// and returns where to read and a count of the attempts it started (nil:
// the client's reads are the attempts).
func startCondition(rig *exp.Rig, cond string, cfg Config, urls []string) (string, func() int64, error) {
	switch cond {
	case condDirect:
		return urls[0], nil, nil
	case condReference:
		front, err := rig.Serve(newReference(urls[0], urls[1], rig.GatewayClient(10*time.Second)))
		return front, nil, err
	}
	gcfg := gateway.Config{Backends: urls}
	switch cond {
	case condOneClass:
		gcfg.Routes = []gateway.Route{{Name: "all", Match: "/", Class: "all"}}
	case condRoutes:
		gcfg.Routes = []gateway.Route{
			{Name: "item", Match: "/item", Delay: cfg.ItemDelay},
			{Name: "search", Match: "/search", Delay: cfg.SearchDelay},
		}
	}
	g, front, err := rig.Gateway(gcfg)
	if err != nil {
		return "", nil, err
	}
	return front, func() int64 { p, h := exp.GatewayAttempts(g); return p + h }, nil
}

// runCondition reads every path through front and summarises each kind.
func runCondition(ctx context.Context, cond string, cfg Config, front string, paths []string, fixtures []*fixture.Fixture, client *http.Client, attempts func() int64) (Condition, error) {
	before := fixture.Sum(fixtures)
	var attemptsBefore int64
	if attempts != nil {
		attemptsBefore = attempts()
	}
	start := time.Now()
	outs := load.Generate(ctx, load.Config{Requests: cfg.Reads, Rate: cfg.Rate, Seed: cfg.Seed}, func(ctx context.Context, i int) error {
		return exp.Read(ctx, client, front+paths[i])
	})
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return Condition{}, err
	}
	if err := fixture.SettleAll(ctx, fixtures); err != nil {
		return Condition{}, err
	}
	c := Condition{Name: cond, All: load.Summarize(outs, elapsed)}
	sent := int64(cfg.Reads - c.All.Dropped)
	if attempts != nil {
		sent = attempts() - attemptsBefore
	}
	c.Work = exp.WorkBetween(before, fixture.Sum(fixtures), sent, cfg.Reads)
	c.AttemptsPerRead = c.Work.PerRequest
	for _, e := range endpoints {
		var mine []load.Outcome
		for i, o := range outs {
			if paths[i][:len(e)+1] == e+"?" {
				mine = append(mine, o)
			}
		}
		c.Endpoints = append(c.Endpoints, Endpoint{Path: e, Summary: load.Summarize(mine, elapsed), latencies: load.LatenciesMs(mine)})
	}
	return c, nil
}
