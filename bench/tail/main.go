// Command tail measures the latency a hop adds at a given rate, open
// loop: reads sent at Poisson-scheduled times whether or not earlier ones
// were answered, each measured from its scheduled send (as
// lab/load does), so a hop that stalls cannot hide its queue. It
// reads each target in turn, at each rate, for several runs whose order
// of targets rotates, and prints one table of p50, p99, p99.9 and max, the
// medians over runs, with each run's host load and the CPU time the
// hypervisor stole while it ran: on a shared machine those move a p99 more
// than anything measured. Within a run, each target's reads go in slices
// (-slices, 12: a third of a second each at 3,000/s), the targets taking
// turns, so that a burst of the host's other work falls on all of them
// rather than on whichever was being read.
//
//	tail [-rates 1000,3000,5000] [-seconds 4] [-runs 3] \
//	     direct=http://127.0.0.1:18181,http://127.0.0.1:18182 \
//	     nginx=http://127.0.0.1:18183 tailgate-off=http://127.0.0.1:18184@pid ...
//
// A target is name=url[,url...][@pid]: several URLs are read in turn (the
// replicas directly); a pid (of the proxy, nginx's master included) adds
// the proxy's CPU time per read, and, for a Go process with an admin
// listener given as -metrics name=url, its garbage collections per
// second. bench/tail.sh starts the replicas and the proxies and runs it.
// Everything binds and targets 127.0.0.1.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
)

type target struct {
	name    string
	urls    []string
	pid     int
	metrics string // a Prometheus /metrics URL of the process, or ""
	client  *http.Client
	next    atomic.Uint64
}

// result is one target's measurement at one rate in one run.
type result struct {
	run, order int
	sum        load.Summary
	load1      float64 // the host's highest 1-minute load average seen during it
	stolenMs   float64 // CPU time stolen from the VM while it ran
	cpuPerRead float64 // µs of the proxy's CPU per read, NaN unknown
	gcPerSec   float64 // the proxy's garbage collections per second, NaN unknown
	rssMB      float64 // the proxy's resident memory after it (its workers' too), NaN unknown
	// attemptsPerRead is the gateway's backend attempts per read (1 with
	// no hedge), NaN unknown.
	attemptsPerRead float64
	achievedPer     float64 // reads sent per second
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "gcjoin" {
		gcjoin(os.Args[2:])
		return
	}
	dump := flag.String("dump", "", "write each measured read here, one line each: target, rate, run, scheduled send (Unix ns), latency (ns), ok (for gcjoin)")
	rates := flag.String("rates", "1000,3000,5000", "comma-separated offered rates, reads per second")
	seconds := flag.Float64("seconds", 4, "seconds of reads per measurement (12,000 reads at 3,000/s)")
	runs := flag.Int("runs", 3, "runs; each reads every target at every rate, in an order that rotates")
	warm := flag.Int("warmup", 300, "reads sent (not measured) before each measurement, at its rate")
	seed := flag.Uint64("seed", 1, "seed of the arrival times (the same in every run of a rate)")
	nslices := flag.Int("slices", 12, "slices each target's reads of a run are sent in, the targets taking turns (a few warm-up reads before each)")
	pairs := flag.String("pairs", "tailgate-off/nginx,tailgate/nginx,tailgate/tailgate-off", "comma-separated a/b: print a's p99 and p99.9 over b's, run by run")
	var metrics multiFlag
	flag.Var(&metrics, "metrics", "name=url of a target's Prometheus /metrics, for its GC count (repeatable)")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatal("usage: tail [flags] name=url[,url...][@pid] ...")
	}
	var targets []*target
	for _, a := range flag.Args() {
		targets = append(targets, parseTarget(a))
	}
	for _, m := range metrics {
		name, u, ok := strings.Cut(m, "=")
		if !ok {
			log.Fatalf("-metrics %q: want name=url", m)
		}
		for _, t := range targets {
			if t.name == name {
				loopback(u)
				t.metrics = u
			}
		}
	}
	var rs []float64
	for _, s := range strings.Split(*rates, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || r <= 0 {
			log.Fatalf("-rates: %q is not a rate", s)
		}
		rs = append(rs, r)
	}

	var dumpTo io.Writer = io.Discard
	if *dump != "" {
		f, err := os.Create(*dump)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		w := bufio.NewWriter(f)
		defer w.Flush()
		dumpTo = w
	}
	// Each target's connections are opened once, before anything is
	// measured: a proxy's first reads pay for its dials.
	for _, t := range targets {
		measure(t, load.Config{Requests: 2000, Rate: rs[len(rs)-1], Seed: *seed})
	}
	if *nslices < 1 {
		log.Fatal("-slices: at least 1")
	}

	results := map[string]map[float64][]result{}
	for _, t := range targets {
		results[t.name] = map[float64][]result{}
	}
	fmt.Printf("%-4s %-6s %-14s %8s %8s %8s %8s %7s %8s %6s %9s %9s\n", "run", "rate", "target", "p50", "p99", "p99.9", "max", "failed", "sent/s", "load", "stolen ms", "CPU us/rd")
	for run := range *runs {
		for _, rate := range rs {
			n := int(rate * *seconds)
			per := (n + *nslices - 1) / *nslices
			order := make([]*target, len(targets))
			for i := range targets {
				order[i] = targets[(i+run)%len(targets)]
			}
			// Each target's reads go in slices, taken in turn, so that the
			// host's bursts of other work fall on every target alike.
			parts := map[*target][]slice{}
			for k := 0; k*per < n; k++ {
				for _, t := range order {
					if k == 0 {
						measure(t, load.Config{Requests: *warm, Rate: rate, Seed: *seed + 1000})
					} else {
						measure(t, load.Config{Requests: min(*warm, per)/4 + 1, Rate: rate, Seed: *seed + 2000 + uint64(k)})
					}
					parts[t] = append(parts[t], measure(t, load.Config{Requests: min(per, n-k*per), Rate: rate, Seed: *seed + uint64(k)}))
				}
			}
			for i, t := range order {
				r := combine(parts[t])
				for _, p := range parts[t] {
					for _, o := range p.outs {
						fmt.Fprintf(dumpTo, "%s %.0f %d %d %d %t\n", t.name, rate, run+1, p.start.Add(o.Scheduled).UnixNano(), o.Latency.Nanoseconds(), o.Err == nil)
					}
				}
				r.run, r.order = run, i
				results[t.name][rate] = append(results[t.name][rate], r)
				s := r.sum
				fmt.Printf("%-4d %-6.0f %-14s %8.2f %8.2f %8.2f %8.2f %7d %8.0f %6.2f %9.0f %9s %s\n", run+1, rate, t.name,
					s.P50Ms, s.P99Ms, s.P999Ms, s.MaxMs, s.Failed+s.Dropped, r.achievedPer, r.load1, r.stolenMs, fmtNaN(r.cpuPerRead, 1), s.FirstError)
			}
		}
	}

	fmt.Printf("\nmedians of %d runs, ms from each read's scheduled send (range over runs in brackets); %d cores shared by all:\n\n", *runs, numCPU())
	fmt.Println("| rate | target | p50 | p99 | p99.9 | max | failed | CPU µs/read | GC/s | RSS MB (most) | attempts/read | load | stolen ms |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, rate := range rs {
		for _, t := range targets {
			r := results[t.name][rate]
			col := func(f func(result) float64, prec int) string {
				v := values(r, f)
				return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, median(v), prec, slices.Min(v), prec, slices.Max(v))
			}
			failed := 0
			for _, x := range r {
				failed += x.sum.Failed + x.sum.Dropped
			}
			fmt.Printf("| %.0f/s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", rate, t.name,
				col(func(x result) float64 { return x.sum.P50Ms }, 2), col(func(x result) float64 { return x.sum.P99Ms }, 1),
				col(func(x result) float64 { return x.sum.P999Ms }, 1), col(func(x result) float64 { return x.sum.MaxMs }, 1), failed,
				fmtNaN(median(values(r, func(x result) float64 { return x.cpuPerRead })), 1),
				fmtNaN(median(values(r, func(x result) float64 { return x.gcPerSec })), 1),
				fmtNaN(slices.Max(values(r, func(x result) float64 { return x.rssMB })), 0),
				fmtNaN(median(values(r, func(x result) float64 { return x.attemptsPerRead })), 3),
				col(func(x result) float64 { return x.load1 }, 1), col(func(x result) float64 { return x.stolenMs }, 0))
		}
	}
	// Ratios within a run: each pair read within a minute of each other,
	// steadier than a ratio of medians while the host's load drifts.
	fmt.Printf("\np99 and p99.9 of one target over another's in the same run (median of the runs' ratios, each run's in brackets):\n")
	for _, rate := range rs {
		for _, pair := range strings.Split(*pairs, ",") {
			a, b, _ := strings.Cut(pair, "/")
			ra, rb := results[a][rate], results[b][rate]
			if ra == nil || rb == nil {
				continue
			}
			p99, p999 := ratios(ra, rb, func(x result) float64 { return x.sum.P99Ms }), ratios(ra, rb, func(x result) float64 { return x.sum.P999Ms })
			fmt.Printf("  %5.0f/s  %-18s p99 %.2fx %-18s p99.9 %.2fx %s\n", rate, pair, median(p99), fmtAll(p99), median(p999), fmtAll(p999))
		}
	}
}

func parseTarget(a string) *target {
	name, rest, ok := strings.Cut(a, "=")
	if !ok || name == "" {
		log.Fatalf("target %q: want name=url[,url...][@pid]", a)
	}
	t := &target{name: name}
	if u, pid, ok := strings.Cut(rest, "@"); ok {
		p, err := strconv.Atoi(pid)
		if err != nil {
			log.Fatalf("target %q: pid %q", a, pid)
		}
		rest, t.pid = u, p
	}
	for _, u := range strings.Split(rest, ",") {
		loopback(u)
		t.urls = append(t.urls, strings.TrimSuffix(u, "/")+"/item?id=1")
	}
	// One client per target, its connections kept across measurements
	// (no idle limit: a proxy left alone while the others are read keeps
	// them, as nginx keeps its upstream ones).
	t.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns: 0, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 0, DisableCompression: true,
		DialContext: (&net.Dialer{}).DialContext,
	}}
	return t
}

// loopback refuses a URL whose host is not 127.0.0.1.
func loopback(s string) {
	u, err := url.Parse(s)
	if err != nil || u.Hostname() != "127.0.0.1" {
		log.Fatalf("%q: want an http://127.0.0.1:port URL", s)
	}
}

// slice is what one stretch of reads of a target measured.
type slice struct {
	start      time.Time // of the reads' schedule
	elapsed    time.Duration
	outs       []load.Outcome
	stolen     time.Duration
	cpuTicks   int64 // -1: unknown
	gcs        int64 // -1: unknown
	attempts   int64 // backend attempts; -1: unknown
	load1, rss float64
}

// measure reads t open loop as c says, and returns what it measured.
func measure(t *target, c load.Config) slice {
	c.Concurrency = 2000
	stolen0, _ := exp.Stolen()
	cpu0 := cpuTicks(t.pid)
	gc0, att0 := scrape(t.metrics)
	start := time.Now()
	outs := load.Generate(context.Background(), c, func(ctx context.Context, i int) error {
		u := t.urls[int(t.next.Add(1))%len(t.urls)]
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := t.client.Do(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return err
	})
	s := slice{start: start, elapsed: time.Since(start), outs: outs, cpuTicks: -1, gcs: -1, load1: load1(), rss: rssMB(t.pid)}
	stolen1, _ := exp.Stolen()
	s.stolen = stolen1 - stolen0
	if cpu1 := cpuTicks(t.pid); cpu0 >= 0 && cpu1 >= 0 {
		s.cpuTicks = cpu1 - cpu0
	}
	gc1, att1 := scrape(t.metrics)
	if gc0 >= 0 && gc1 >= 0 {
		s.gcs = gc1 - gc0
	}
	if att0 >= 0 && att1 >= 0 {
		s.attempts = att1 - att0
	}
	return s
}

// combine makes one result of a run's slices of a target.
func combine(parts []slice) result {
	var outs []load.Outcome
	var elapsed, stolen time.Duration
	ticks, gcs, attempts := int64(0), int64(0), int64(0)
	r := result{cpuPerRead: math.NaN(), gcPerSec: math.NaN(), rssMB: math.NaN(), attemptsPerRead: math.NaN()}
	for _, p := range parts {
		outs = append(outs, p.outs...)
		elapsed += p.elapsed
		stolen += p.stolen
		if ticks >= 0 && p.cpuTicks >= 0 {
			ticks += p.cpuTicks
		} else {
			ticks = -1
		}
		if gcs >= 0 && p.gcs >= 0 {
			gcs += p.gcs
		} else {
			gcs = -1
		}
		if attempts >= 0 && p.attempts >= 0 {
			attempts += p.attempts
		} else {
			attempts = -1
		}
		r.load1 = max(r.load1, p.load1)
		if !math.IsNaN(p.rss) && !(p.rss <= r.rssMB) { // r.rssMB may be NaN
			r.rssMB = p.rss
		}
	}
	r.sum = load.Summarize(outs, elapsed)
	r.stolenMs = float64(stolen) / 1e6
	r.achievedPer = float64(len(outs)) / elapsed.Seconds()
	if ticks >= 0 {
		r.cpuPerRead = float64(ticks) / clkTck * 1e6 / float64(len(outs))
	}
	if gcs >= 0 {
		r.gcPerSec = float64(gcs) / elapsed.Seconds()
	}
	if attempts >= 0 {
		r.attemptsPerRead = float64(attempts) / float64(len(outs))
	}
	return r
}

// clkTck is Linux's USER_HZ, the unit of /proc/<pid>/stat's CPU times.
const clkTck = 100

// cpuTicks returns the user and system CPU time of pid and its children
// (nginx's workers), in ticks; -1 when pid is 0 or unreadable.
func cpuTicks(pid int) int64 {
	if pid <= 0 {
		return -1
	}
	pids := []int{pid}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				pids = append(pids, c)
			}
		}
	}
	var sum int64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			return -1
		}
		// Fields after the command (which may hold spaces), from its ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			return -1
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		sum += u + k
	}
	return sum
}

// scrape reads a /metrics URL: the garbage collections the process has
// run (go_gc_duration_seconds_count) and the backend attempts the
// gateway has started (tailgate_attempts_total, all routes and roles);
// -1 for what it does not find.
func scrape(u string) (gcs, attempts int64) {
	gcs, attempts = -1, -1
	if u == "" {
		return
	}
	resp, err := http.Get(u)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			continue
		}
		switch {
		case name == "go_gc_duration_seconds_count":
			gcs = int64(n)
		case strings.HasPrefix(name, "tailgate_attempts_total{"):
			attempts = max(attempts, 0) + int64(n)
		}
	}
	return
}

// rssMB returns the resident memory of pid and its children, in MB;
// NaN when pid is 0 or unreadable.
func rssMB(pid int) float64 {
	if pid <= 0 {
		return math.NaN()
	}
	pids := []int{pid}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				pids = append(pids, c)
			}
		}
	}
	var kb float64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			return math.NaN()
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				f := strings.Fields(v)
				n, _ := strconv.ParseFloat(f[0], 64)
				kb += n
			}
		}
	}
	return kb / 1024
}

func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func numCPU() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "processor\t:")
}

func values(r []result, f func(result) float64) []float64 {
	out := make([]float64, len(r))
	for i, x := range r {
		out[i] = f(x)
	}
	return out
}

func ratios(a, b []result, f func(result) float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		out = append(out, f(a[i])/f(b[i]))
	}
	return out
}

// median of v; NaN when v is empty or all NaN. Infinite values (a run
// with failed reads) sort last.
func median(v []float64) float64 {
	v = slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func fmtNaN(v float64, prec int) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func fmtAll(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return "[" + strings.Join(s, " ") + "]"
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }
