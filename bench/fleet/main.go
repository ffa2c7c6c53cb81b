// Command fleet drives a fleet of gateways behind one load balancer and
// accounts for their duplicate work against the budget's bound; it is the
// load driver and the judge of bench/fleet.sh.
//
// Each gateway's budget earns -hedge-fraction f of a credit per admitted
// request and holds at most -hedge-burst b, so instance i sends at most
// b + f·reads_i hedges. Budgets are per process and nothing is shared, so
// N instances behind a balancer compose by summing: the fleet sends at
// most N·b + f·(total reads) hedges, however the balancer spreads the
// reads. The driver sends an open-loop load (bounded by -requests and
// -duration) through -target, then reads every instance's /metrics
// (tailgate_requests_total, tailgate_attempts_total{role}, the budget's
// gauges) and prints, per instance and in total, reads, attempts per read,
// hedges against the bound, and the latency the clients saw. It exits 1 if
// an instance or the fleet sent more hedges than its bound, or, with
// -must-bind, if an instance's budget never refused a hedge (its bound was
// never reached, so holding to it proved nothing).
//
//	go run ./bench/fleet drive -target 127.0.0.1:19280 \
//	  -admins 127.0.0.1:19291,127.0.0.1:19292,127.0.0.1:19293 -rate 300 -requests 3000
//
// Two helpers for the script: "fleet probe URL" exits 0 when a loopback
// URL answers 200, and "fleet haproxy-up SOCKET BACKEND" prints how many
// servers of an HAProxy backend its stats socket reports UP.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/bench/internal/promtext"
)

func main() {
	os.Exit(command(os.Args[1:], os.Stdout, os.Stderr))
}

func command(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: fleet drive [flags] | fleet probe URL | fleet haproxy-up SOCKET BACKEND")
		return 2
	}
	switch cmd, rest := args[0], args[1:]; {
	case cmd == "drive":
		return run(rest, stdout, stderr)
	case cmd == "probe" && len(rest) == 1:
		if err := probe(rest[0]); err != nil {
			fmt.Fprintln(stderr, "fleet:", err)
			return 1
		}
		return 0
	case cmd == "haproxy-up" && len(rest) == 2:
		n, err := haproxyUp(rest[0], rest[1])
		if err != nil {
			fmt.Fprintln(stderr, "fleet:", err)
			return 1
		}
		fmt.Fprintln(stdout, n)
		return 0
	}
	fmt.Fprintf(stderr, "fleet: unknown command or wrong arguments: %q\n", args)
	return 2
}

// probe gets url (on loopback) and wants a 200.
func probe(url string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if err := loopback(req.URL.Host); err != nil {
		return err
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
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

// haproxyUp counts the servers of backend that HAProxy's stats socket
// (its "show stat" CSV) reports UP.
func haproxyUp(socket, backend string) (int, error) {
	conn, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "show stat\n"); err != nil {
		return 0, err
	}
	return countUp(conn, backend)
}

// countUp counts, in "show stat" CSV, the servers of backend whose status
// is UP.
func countUp(r io.Reader, backend string) (int, error) {
	lines := bufio.NewScanner(r)
	status := -1
	n := 0
	for lines.Scan() {
		f := strings.Split(lines.Text(), ",")
		if strings.HasPrefix(f[0], "# pxname") {
			status = slices.Index(f, "status")
			continue
		}
		if status < 0 || len(f) <= status || f[0] != backend || f[1] == "BACKEND" || f[1] == "FRONTEND" {
			continue
		}
		if f[status] == "UP" {
			n++
		}
	}
	if status < 0 {
		return 0, errors.New("no header line in the stats")
	}
	return n, lines.Err()
}

type config struct {
	name     string
	target   string
	admins   []string
	rate     float64
	requests int
	duration time.Duration
	timeout  time.Duration
	inflight int
	mustBind bool
}

func run(args []string, stdout, stderr io.Writer) int {
	var c config
	var admins string
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.name, "name", "fleet", "name of the workload, for the report")
	fs.StringVar(&c.target, "target", "127.0.0.1:19280", "the load balancer's address (loopback)")
	fs.StringVar(&admins, "admins", "", "comma-separated admin addresses of the gateways behind it (loopback)")
	fs.Float64Var(&c.rate, "rate", 300, "reads per second, open loop")
	fs.IntVar(&c.requests, "requests", 3000, "reads to send at most")
	fs.DurationVar(&c.duration, "duration", 15*time.Second, "longest time to send them")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "client timeout per read")
	fs.IntVar(&c.inflight, "max-inflight", 2000, "reads in flight at most; a read due beyond it is not sent and counted as skipped")
	fs.BoolVar(&c.mustBind, "must-bind", false, "fail unless every instance's budget refused a hedge (the workload wanted more than the bound)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, a := range strings.Split(admins, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.admins = append(c.admins, a)
		}
	}
	if err := c.check(); err != nil {
		fmt.Fprintln(stderr, "fleet:", err)
		return 2
	}
	ok, err := measure(c, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "fleet:", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

func (c config) check() error {
	if len(c.admins) == 0 {
		return errors.New("-admins is required")
	}
	for _, a := range append([]string{c.target}, c.admins...) {
		if err := loopback(a); err != nil {
			return err
		}
	}
	switch {
	case !(c.rate > 0 && c.rate <= 10000):
		return fmt.Errorf("-rate %v: want (0, 10000]", c.rate)
	case c.requests < 1 || c.requests > 100000:
		return fmt.Errorf("-requests %d: want [1, 100000]", c.requests)
	case c.duration <= 0 || c.duration > 2*time.Minute:
		return fmt.Errorf("-duration %v: want (0, 2m]", c.duration)
	case c.timeout <= 0 || c.inflight < 1:
		return errors.New("-timeout and -max-inflight must be positive")
	}
	return nil
}

// loopback refuses an address that is not on 127.0.0.1 (or ::1).
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: only loopback addresses", addr)
	}
	return nil
}

// measure drives the load and prints the account; ok is false when a
// bound was broken or the workload hedged too little.
func measure(c config, out io.Writer) (bool, error) {
	before, err := scrapeAll(c.admins)
	if err != nil {
		return false, err
	}
	res := drive(c)
	if err := waitIdle(c.admins, 5*time.Second); err != nil {
		return false, err
	}
	after, err := scrapeAll(c.admins)
	if err != nil {
		return false, err
	}
	insts := make([]instance, len(c.admins))
	for i := range c.admins {
		insts[i] = account(c.admins[i], before[i], after[i])
	}
	return report(out, c, res, insts), nil
}

// result is what the clients saw.
type result struct {
	sent, skipped int
	codes         map[int]int     // by HTTP status; 0: no answer (transport error, timeout)
	lat, latOK    []time.Duration // of every answer, of the 200s
	elapsed       time.Duration
}

// drive sends c.requests reads at c.rate, open loop, for at most
// c.duration, and waits for every answer.
func drive(c config) result {
	tr := &http.Transport{MaxIdleConnsPerHost: c.inflight, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: c.timeout}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		res = result{codes: map[int]int{}}
	)
	slots := make(chan struct{}, c.inflight)
	start := time.Now()
	interval := time.Duration(float64(time.Second) / c.rate)
	for i := range c.requests {
		due := start.Add(time.Duration(i) * interval)
		if due.Sub(start) >= c.duration {
			break
		}
		time.Sleep(time.Until(due))
		select {
		case slots <- struct{}{}:
		default:
			res.skipped++
			continue
		}
		res.sent++
		wg.Go(func() {
			defer func() { <-slots }()
			code, d := get(client, fmt.Sprintf("http://%s/item?id=%d", c.target, i))
			mu.Lock()
			res.codes[code]++
			if code != 0 {
				res.lat = append(res.lat, d)
			}
			if code == http.StatusOK {
				res.latOK = append(res.latOK, d)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.Sort(res.lat)
	slices.Sort(res.latOK)
	return res
}

// get reads url to its end: the status (0 if no complete answer) and the
// time to the end of the body.
func get(client *http.Client, url string) (int, time.Duration) {
	t0 := time.Now()
	resp, err := client.Get(url)
	if err != nil {
		return 0, time.Since(t0)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, time.Since(t0)
	}
	return resp.StatusCode, time.Since(t0)
}

// quantile returns the q-quantile of sorted (nearest rank), 0 if empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// scrape reads a gateway's /metrics, and refuses a page that is not a
// hedging gateway's.
func scrape(admin string) (promtext.Metrics, error) {
	m, err := promtext.Scrape(admin)
	if err != nil {
		return nil, err
	}
	// The budget's series carry the route whose budget it is.
	if _, ok := m[`tailgate_hedge_budget_fraction{route="default"}`]; !ok {
		return nil, fmt.Errorf("%s/metrics: no tailgate_hedge_budget_fraction of route default: not a hedging gateway", admin)
	}
	return m, nil
}

func scrapeAll(admins []string) ([]promtext.Metrics, error) {
	all := make([]promtext.Metrics, len(admins))
	for i, a := range admins {
		m, err := scrape(a)
		if err != nil {
			return nil, err
		}
		all[i] = m
	}
	return all, nil
}

// waitIdle waits until no gateway has a request in flight, so that the
// counters read next are final.
func waitIdle(admins []string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		busy := false
		for _, a := range admins {
			m, err := scrape(a)
			if err != nil {
				return err
			}
			if m[`tailgate_in_flight{kind="requests"}`] > 0 || m[`tailgate_in_flight{kind="attempts"}`] > 0 {
				busy = true
			}
		}
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gateways still busy %v after the load ended", limit)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// instance is one gateway's account over the run.
type instance struct {
	admin                          string
	reads                          float64 // client requests answered (tailgate_requests_total, every code)
	primaries, hedges              float64 // tailgate_attempts_total by role
	shadows                        float64 // probation shadow requests (not hedges: rate-limited apart)
	fraction, burst                float64 // the budget's settings
	suppressedBudget, suppressGate float64
}

// account is one instance's figures between two scrapes of its /metrics.
func account(admin string, before, after promtext.Metrics) instance {
	d := func(name string) float64 { return after.Sum(name) - before.Sum(name) }
	return instance{
		admin:            admin,
		reads:            d("tailgate_requests_total"),
		primaries:        after.SumWith("tailgate_attempts_total", `role="primary"`) - before.SumWith("tailgate_attempts_total", `role="primary"`),
		hedges:           after.SumWith("tailgate_attempts_total", `role="hedge"`) - before.SumWith("tailgate_attempts_total", `role="hedge"`),
		shadows:          d("tailgate_shadow_requests_total"),
		fraction:         after.SumWith("tailgate_hedge_budget_fraction", `route="default"`),
		burst:            after.SumWith("tailgate_hedge_budget_burst", `route="default"`),
		suppressedBudget: after.SumWith("tailgate_hedges_suppressed_total", `reason="budget"`) - before.SumWith("tailgate_hedges_suppressed_total", `reason="budget"`),
		suppressGate:     after.SumWith("tailgate_hedges_suppressed_total", `reason="gate"`) - before.SumWith("tailgate_hedges_suppressed_total", `reason="gate"`),
	}
}

// bound is the most hedges the instance's budget allows for its reads:
// burst + fraction × reads (reads answered are at least the requests its
// budget admitted, so this is never tighter than the budget's own bound).
func (in instance) bound() float64 { return in.burst + in.fraction*in.reads }

func (in instance) perRead() float64 {
	if in.reads == 0 {
		return 0
	}
	return (in.primaries + in.hedges) / in.reads
}

// fleet sums the instances; bound is then N·b + f·(total reads) when they
// share f and b, and Σ(b_i + f_i·reads_i) in any case.
func fleet(insts []instance) instance {
	t := instance{admin: "total"}
	for _, in := range insts {
		t.reads += in.reads
		t.primaries += in.primaries
		t.hedges += in.hedges
		t.shadows += in.shadows
		t.burst += in.burst
		t.suppressedBudget += in.suppressedBudget
		t.suppressGate += in.suppressGate
	}
	if t.reads > 0 {
		var earned float64
		for _, in := range insts {
			earned += in.fraction * in.reads
		}
		t.fraction = earned / t.reads // the reads' weighted mean
	}
	return t
}

// within reports whether in's hedges stay within its bound (with room
// for float rounding only).
func (in instance) within() bool { return in.hedges <= in.bound()+1e-6 }

// report prints the account; false if a bound was broken or the fleet
// with c.mustBind, an instance's budget never refused a hedge.
func report(out io.Writer, c config, res result, insts []instance) bool {
	ok := true
	codes := make([]int, 0, len(res.codes))
	for k := range res.codes {
		codes = append(codes, k)
	}
	slices.Sort(codes)
	var byCode []string
	for _, k := range codes {
		name := strconv.Itoa(k)
		if k == 0 {
			name = "no-answer"
		}
		byCode = append(byCode, fmt.Sprintf("%s:%d", name, res.codes[k]))
	}
	fmt.Fprintf(out, "== %s: %d reads sent in %.1fs (%.0f/s offered, %d skipped), answers %s\n",
		c.name, res.sent, res.elapsed.Seconds(), c.rate, res.skipped, strings.Join(byCode, " "))
	for _, l := range []struct {
		name string
		lat  []time.Duration
	}{{"every answer", res.lat}, {"200s only", res.latOK}} {
		fmt.Fprintf(out, "   client latency (%s): p50 %v  p90 %v  p99 %v  max %v\n", l.name,
			ms(quantile(l.lat, 0.5)), ms(quantile(l.lat, 0.9)), ms(quantile(l.lat, 0.99)), ms(quantile(l.lat, 1)))
	}
	fmt.Fprintf(out, "   %-17s %6s %8s %6s %9s %8s %7s %13s %12s %7s\n",
		"instance", "reads", "primary", "hedge", "att/read", "bound", "used", "supp(budget)", "supp(gate)", "shadow")
	line := func(in instance) {
		used := 0.0
		if b := in.bound(); b > 0 {
			used = in.hedges / b
		}
		verdict := "ok"
		if !in.within() {
			verdict = "OVER"
			ok = false
		}
		fmt.Fprintf(out, "   %-17s %6.0f %8.0f %6.0f %9.3f %8.1f %6.0f%% %13.0f %12.0f %7.0f  %s\n",
			in.admin, in.reads, in.primaries, in.hedges, in.perRead(), in.bound(), 100*used, in.suppressedBudget, in.suppressGate, in.shadows, verdict)
	}
	for _, in := range insts {
		line(in)
	}
	t := fleet(insts)
	line(t)
	same := true
	for _, in := range insts {
		same = same && in.fraction == insts[0].fraction && in.burst == insts[0].burst
	}
	if same {
		fmt.Fprintf(out, "   bound: f·reads + N·b = %g × %.0f + %d × %g = %.1f; hedges %.0f (%.3f per read; budget alone allows %.3f)\n",
			insts[0].fraction, t.reads, len(insts), insts[0].burst, t.bound(), t.hedges, t.hedges/max(t.reads, 1), t.bound()/max(t.reads, 1))
	} else {
		fmt.Fprintf(out, "   bound: Σ(b_i + f_i·reads_i) = %.1f; hedges %.0f\n", t.bound(), t.hedges)
	}
	if answered := float64(res.sent - res.codes[0]); t.reads < answered {
		// Each answer the clients saw was counted by one gateway.
		fmt.Fprintf(out, "   FAIL: the gateways counted %.0f reads, the clients got %.0f answers\n", t.reads, answered)
		ok = false
	}
	if c.mustBind {
		for _, in := range insts {
			if in.suppressedBudget < 1 {
				fmt.Fprintf(out, "   FAIL: %s's budget refused no hedge: its bound was never reached, so the workload did not test it\n", in.admin)
				ok = false
			}
		}
	}
	if !t.within() {
		fmt.Fprintf(out, "   FAIL: the fleet sent %.0f hedges, over its bound %.1f\n", t.hedges, t.bound())
	} else if ok {
		fmt.Fprintf(out, "   PASS: every instance and the fleet within the bound\n")
	}
	return ok && t.within()
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
}
