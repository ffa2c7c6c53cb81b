// Command skew serves the cache replicas of bench/skew.sh and drives one
// proxy in front of them with the load of "tailgate lab skew", so that
// HAProxy's consistent hashing (with and without its bounded load) and
// tailgate serve's affinity mode meet the same replicas and the same
// reads.
//
//	skew replicas -addrs 127.0.0.1:19301,127.0.0.1:19302 [-workers 2 -cache-keys 100 -hit 10ms -miss 50ms]
//	skew drive -name NAME -target 127.0.0.1:19300 -replicas http://127.0.0.1:19301,... [-partitions URL] [-header]
//	skew probe URL
//
// "replicas" serves one cache fixture (lab/fixture: an LRU of
// keys, a hit and a miss each holding one of the replica's workers) on
// each address, until interrupted; each also counts the reads it
// receives at /arrivals. "drive" offers the lab's workload through the
// target (Poisson arrivals at -load of the tier's capacity, Zipf keys in
// the key query parameter, the warm-up ramped up from a quarter of the
// rate) and prints one table row: the clients' p50 and p99 (from each
// read's scheduled time, a failed read infinitely slow), the replicas'
// hit ratio, the most reads one received over the mean, the attempts per
// read the replicas saw (1 plus the proxy's hedges), and, with
// -partitions (tailgate's /debug/partitions), the partitions moved and
// the hot keys. Everything is measured after the warm-up but the attempts
// per read, which count every read sent and every arrival, from before
// the first read to after the last has ended: a ratio of two counts
// taken at instants would drift with a busy machine (a read scheduled in
// the span and sent after its end). "probe" exits 0 when a loopback URL
// answers 200.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/exp/skew"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
)

func main() {
	os.Exit(command(os.Args[1:], os.Stdout, os.Stderr))
}

func command(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: skew replicas [flags] | skew drive [flags] | skew probe URL")
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; {
	case cmd == "replicas":
		err = replicas(rest, stderr)
	case cmd == "drive":
		err = drive(rest, stdout, stderr)
	case cmd == "probe" && len(rest) == 1:
		err = probe(rest[0])
	default:
		fmt.Fprintf(stderr, "skew: unknown command or wrong arguments: %q\n", args)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "skew:", err)
		return 1
	}
	return 0
}

// tierFlags are the tier's settings, the same for "replicas" and "drive".
type tierFlags struct {
	workers, keys, cacheKeys int
	exponent, load           float64
	hit, miss                time.Duration
	seed                     uint64
}

func (t *tierFlags) register(fs *flag.FlagSet) {
	d := skew.Defaults()
	fs.IntVar(&t.workers, "workers", d.Workers, "reads each replica serves at once")
	fs.IntVar(&t.keys, "keys", d.Keys, "key space")
	fs.IntVar(&t.cacheKeys, "cache-keys", d.CacheKeys, "keys each replica caches")
	fs.Float64Var(&t.exponent, "exponent", d.Exponent, "Zipf exponent of key popularity")
	fs.Float64Var(&t.load, "load", d.Load, "offered rate as a share of the tier's capacity (as tailgate lab skew)")
	fs.DurationVar(&t.hit, "hit", d.Hit, "service time of a hit")
	fs.DurationVar(&t.miss, "miss", d.Miss, "service time of a miss")
	fs.Uint64Var(&t.seed, "seed", 1, "seed of arrivals and keys")
}

// arrivalsPath serves a replica's count of the reads it received.
const arrivalsPath = "/arrivals"

// replicas serves a cache fixture on each of -addrs until interrupted.
func replicas(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("skew replicas", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var t tierFlags
	t.register(fs)
	addrs := fs.String("addrs", "", "comma-separated loopback addresses, one replica each")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fixtures, err := startReplicas(strings.Split(*addrs, ","), t)
	defer fixture.CloseAll(fixtures)
	if err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	return nil
}

// startReplicas starts a cache fixture on each of addrs (loopback
// addresses; the fixture refuses others), each counting the reads it
// receives at arrivalsPath. On an error it returns the ones it started.
func startReplicas(addrs []string, t tierFlags) ([]*fixture.Fixture, error) {
	var fixtures []*fixture.Fixture
	for i, addr := range addrs {
		var n atomic.Int64
		count := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case arrivalsPath:
					fmt.Fprintf(w, "{\"arrivals\":%d}\n", n.Load())
					return
				case "/stats":
				default:
					n.Add(1)
				}
				next.ServeHTTP(w, r)
			})
		}
		f, err := fixture.Start(fixture.Config{Name: "cache-" + strconv.Itoa(i+1), Addr: addr, Capacity: t.workers, Seed: t.seed*1_000_003 + uint64(i),
			Middleware: count, Cache: &fixture.Cache{Keys: t.cacheKeys, Hit: fixture.Constant(t.hit), Miss: fixture.Constant(t.miss)}})
		if err != nil {
			return fixtures, err
		}
		fixtures = append(fixtures, f)
	}
	return fixtures, nil
}

// replicaCounts is what one replica has counted.
type replicaCounts struct {
	arrivals, hits, misses int64
}

// counts reads each replica's /arrivals and /stats.
func counts(client *http.Client, urls []string) ([]replicaCounts, error) {
	out := make([]replicaCounts, len(urls))
	for i, u := range urls {
		var a struct {
			Arrivals int64 `json:"arrivals"`
		}
		var st fixture.Stats
		if err := getJSON(client, u+arrivalsPath, &a); err != nil {
			return nil, err
		}
		if err := getJSON(client, u+"/stats", &st); err != nil {
			return nil, err
		}
		out[i] = replicaCounts{a.Arrivals, st.CacheHits, st.CacheMisses}
	}
	return out, nil
}

func getJSON(client *http.Client, url string, v any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// drive offers the lab's workload through -target and prints one row.
func drive(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("skew drive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var t tierFlags
	t.register(fs)
	name := fs.String("name", "", "the row's name")
	target := fs.String("target", "", "the proxy's loopback address")
	urls := fs.String("replicas", "", "comma-separated base URLs of the replicas, for their counters")
	parts := fs.String("partitions", "", "tailgate's /debug/partitions URL, for moves and hot keys; comma-separated for several gateways, whose homes are compared")
	warmup := fs.Duration("warmup", 4*time.Second, "reads before the measurement, ramped up from a quarter of the rate")
	duration := fs.Duration("duration", 6*time.Second, "the measurement")
	timeout := fs.Duration("timeout", 5*time.Second, "bound on each read")
	header := fs.Bool("header", false, "print the table's header first")
	rate := fs.Float64("rate", 0, "offered reads/s (0: -load of the tier's capacity)")
	reads := fs.Int("reads", 0, "reads of the whole run, warm-up included, at the offered rate: sets -duration (0: -duration)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	reps := strings.Split(*urls, ",")
	var partURLs []string
	if *parts != "" {
		partURLs = strings.Split(*parts, ",")
	}
	for _, a := range slices.Concat([]string{"http://" + *target}, reps, partURLs) {
		if a == "" {
			continue
		}
		if err := loopbackURL(a); err != nil {
			return err
		}
	}
	tier, err := skew.PlanTier(len(reps), t.workers, t.keys, t.cacheKeys, t.exponent, t.hit, t.miss, t.load)
	if err != nil {
		return err
	}
	if *rate < 0 || *rate > skew.MaxRate || *reads < 0 || *reads > skew.MaxReads {
		return fmt.Errorf("-rate %v and -reads %d: want 0 <= rate <= %d, 0 <= reads <= %d", *rate, *reads, skew.MaxRate, skew.MaxReads)
	}
	if *rate > 0 {
		tier.Rate = *rate
		t.load = *rate / tier.CapacityPerSec
	}
	if *reads > 0 {
		// The run's arrivals at the rate, warm-up included, take about
		// reads/rate: the measured span is the rest.
		*duration = time.Duration(float64(*reads)/tier.Rate*float64(time.Second)) - *warmup
	}
	if *warmup < 0 || *duration < time.Second || *duration > 5*time.Minute || *warmup > 5*time.Minute {
		return fmt.Errorf("-warmup %v and -duration %v: want 0 <= warmup <= 5m, 1s <= duration <= 5m", *warmup, *duration)
	}
	offer := skew.Arrivals(tier.Rate, *warmup+*duration, t.seed)
	if *reads > 0 {
		offer.Requests = *reads // exactly, though Poisson arrivals at the rate take about as long
	}
	offer.Concurrency = int(tier.Rate*timeout.Seconds()) + 100
	keys, err := skew.Keys(t.keys, t.exponent, offer.Requests, t.seed)
	if err != nil {
		return err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: *timeout}
	front := "http://" + *target + "/item?id="

	before, err := counts(client, reps)
	if err != nil {
		return err
	}
	var sent atomic.Int64 // reads sent, warm-up included
	start := time.Now()
	var marks [2][]replicaCounts
	var markErr [2]error
	var wg sync.WaitGroup
	wg.Go(func() {
		for k, at := range []time.Duration{*warmup, *warmup + *duration} {
			time.Sleep(time.Until(start.Add(at)))
			marks[k], markErr[k] = counts(client, reps)
		}
	})
	outs := load.Generate(context.Background(), offer, func(ctx context.Context, i int) error {
		if !skew.WarmupSends(t.seed, i, time.Since(start), *warmup) {
			return nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, front+strconv.Itoa(i)+"&key="+keys[i], nil)
		if err != nil {
			return err
		}
		sent.Add(1)
		return exp.Fetch(client, req)
	})
	wg.Wait()
	if err := errors.Join(markErr[0], markErr[1]); err != nil {
		return err
	}
	// Every read has ended (Generate waits for them): what the replicas
	// count now is all they will get, losers cancelled on the way
	// included, unless a proxy's attempt outlives its read.
	after, err := counts(client, reps)
	if err != nil {
		return err
	}
	var measured []load.Outcome
	for _, o := range outs {
		if o.Scheduled >= *warmup {
			measured = append(measured, o)
		}
	}
	sum := load.Summarize(measured, *duration)
	var hits, misses, arrivals, top, all int64
	for i := range reps {
		a := marks[1][i].arrivals - marks[0][i].arrivals
		hits += marks[1][i].hits - marks[0][i].hits
		misses += marks[1][i].misses - marks[0][i].misses
		arrivals += a
		top = max(top, a)
		all += after[i].arrivals - before[i].arrivals
	}
	row := []string{*name, ratio(hits, hits+misses), "", exp.Cell(sum.P50Ms), exp.Cell(sum.P99Ms), strconv.Itoa(sum.Failed + sum.Dropped), "", "—", "—", "—"}
	if arrivals > 0 {
		row[2] = exp.F2(float64(top) * float64(len(reps)) / float64(arrivals))
	}
	if n := sent.Load(); n > 0 {
		row[6] = exp.F2(float64(all) / float64(n))
	}
	if len(partURLs) > 0 {
		var moves, hot []string
		var homes [][]string // per gateway, each partition's home
		for _, u := range partURLs {
			var p struct {
				MovesTotal uint64     `json:"movesTotal"`
				HotKeys    []any      `json:"hotKeys"`
				Assignment [][]string `json:"assignment"`
			}
			if err := getJSON(client, u, &p); err != nil {
				return err
			}
			moves = append(moves, strconv.FormatUint(p.MovesTotal, 10))
			hot = append(hot, strconv.Itoa(len(p.HotKeys)))
			h := make([]string, len(p.Assignment))
			for i, own := range p.Assignment {
				if len(own) > 0 {
					h[i] = own[0]
				}
			}
			homes = append(homes, h)
		}
		row[7], row[8] = strings.Join(moves, "/"), strings.Join(hot, "/")
		if len(homes) > 1 {
			row[9] = strconv.Itoa(homesDiffer(homes))
		}
	}
	if *header {
		fmt.Fprintf(stdout, "%d cache replicas (%d workers, an LRU of %d keys, hit %v, miss %v), %d keys Zipf %g: %.0f reads/s (%.2f of %.0f), %d reads: %v warm-up, %v measured\n",
			len(reps), t.workers, t.cacheKeys, t.hit, t.miss, t.keys, t.exponent, tier.Rate, t.load, tier.CapacityPerSec, offer.Requests, *warmup, duration.Round(time.Millisecond))
		fmt.Fprintf(stdout, "%-46s %9s %9s %9s %9s %7s %9s %6s %6s %6s\n", "proxy", "hit ratio", "load max", "p50 ms", "p99 ms", "failed", "attempts", "moves", "hot", "homes")
		fmt.Fprintf(stdout, "%-46s %9s %9s %9s %9s %7s %9s %6s %6s %6s\n", "", "", "/mean", "", "", "", "/read", "", "keys", "differ")
	}
	fmt.Fprintf(stdout, "%-46s %9s %9s %9s %9s %7s %9s %6s %6s %6s\n", row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9])
	return nil
}

// homesDiffer counts the partitions whose home is not the same in every
// gateway's assignment: where a key would be warm in more than one cache.
func homesDiffer(homes [][]string) int {
	n := 0
	for p := range homes[0] {
		for _, h := range homes[1:] {
			if p >= len(h) || h[p] != homes[0][p] {
				n++
				break
			}
		}
	}
	return n
}

func ratio(a, b int64) string {
	if b == 0 {
		return "—"
	}
	return exp.F3(float64(a) / float64(b))
}

// loopbackURL refuses a URL whose host is not a loopback IP address.
func loopbackURL(u string) error {
	rest, ok := strings.CutPrefix(u, "http://")
	if !ok {
		return fmt.Errorf("%s: want http://127.0.0.1:PORT/...", u)
	}
	host, _, err := net.SplitHostPort(strings.SplitN(rest, "/", 2)[0])
	if err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s: not a loopback address", u)
	}
	return nil
}

// probe gets url (on loopback) and wants a 200.
func probe(url string) error {
	if err := loopbackURL(url); err != nil {
		return err
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
