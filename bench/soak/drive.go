package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tailgate-dev/tailgate/bench/internal/promtext"
)

type driveConfig struct {
	target, admin   string
	duration        time.Duration // of the mixed load
	warmup          time.Duration // of the mix, before the start is measured
	timeout         time.Duration // the gateway's -timeout
	headerTimeout   time.Duration // the gateway's ReadHeaderTimeout
	slack           time.Duration // allowed beyond either, for scheduling on a busy machine
	settle          time.Duration // longest wait for memory and goroutines to come back
	tolerance       float64       // how far above the start they may end
	rate, workers   int           // normal reads per second, and most at once
	idle, slowloris int           // connections held idle, and sending headers slowly
	abuseRate       int           // malformed or refused requests per second
	pid             int           // the gateway's process, for a finer account of its memory (0: none)
}

func runDrive(args []string, out io.Writer) (bool, error) {
	var c driveConfig
	fs := flag.NewFlagSet("soak drive", flag.ExitOnError)
	fs.StringVar(&c.target, "target", "127.0.0.1:19180", "the gateway's client address")
	fs.StringVar(&c.admin, "admin", "127.0.0.1:19190", "the gateway's admin address")
	fs.DurationVar(&c.duration, "duration", 5*time.Minute, "how long the mixed load runs")
	fs.DurationVar(&c.warmup, "warmup", 30*time.Second, "the mix before the start is measured (10s after it)")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Second, "the gateway's -timeout: no request may take longer (plus -slack)")
	fs.DurationVar(&c.headerTimeout, "header-timeout", 5*time.Second, "the gateway's header read timeout: no slowloris connection may outlive it (plus -slack)")
	fs.DurationVar(&c.slack, "slack", 500*time.Millisecond, "allowance beyond the timeouts for scheduling and transfer")
	fs.DurationVar(&c.settle, "settle", 150*time.Second, "longest wait once idle for memory and goroutines to come back")
	fs.Float64Var(&c.tolerance, "tolerance", 0.10, "how far above their start RSS and goroutines may end")
	fs.IntVar(&c.rate, "rate", 200, "normal reads per second")
	fs.IntVar(&c.workers, "workers", 64, "normal reads in flight at most (a read due with none free is counted as skipped)")
	fs.IntVar(&c.idle, "idle", 1000, "connections held idle after one read each (reopened when the gateway closes them)")
	fs.IntVar(&c.slowloris, "slowloris", 50, "connections sending their headers a line a second")
	fs.IntVar(&c.abuseRate, "abuse-rate", 20, "refused or malformed requests per second: bodies on GET, other methods")
	fs.IntVar(&c.pid, "pid", 0, "the gateway's process id, to report its resident memory from the executable file apart (Linux; 0: not)")
	fs.Parse(args)
	for _, a := range []struct{ flag, addr string }{{"-target", c.target}, {"-admin", c.admin}} {
		if err := loopback(a.flag, a.addr); err != nil {
			return false, err
		}
	}
	if c.duration <= 0 || c.duration > time.Hour || c.rate < 1 || c.workers < 1 || c.idle < 0 || c.slowloris < 0 || c.abuseRate < 0 {
		return false, errors.New("want 0 < -duration <= 1h, -rate and -workers >= 1, the others >= 0")
	}
	return drive(c, out)
}

// tally counts requests by kind and status, and keeps the slowest.
type tally struct {
	mu      sync.Mutex
	counts  map[string]map[string]int
	slowest map[string]time.Duration
	over    []string // the first requests past their limit
	overN   int
}

func newTally() *tally {
	return &tally{counts: map[string]map[string]int{}, slowest: map[string]time.Duration{}}
}

// add records one request of kind that ended with status after d, which
// must not exceed limit.
func (t *tally) add(kind, status string, d, limit time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts[kind] == nil {
		t.counts[kind] = map[string]int{}
	}
	t.counts[kind][status]++
	t.slowest[kind] = max(t.slowest[kind], d)
	if d > limit {
		t.overN++
		if len(t.over) < 10 {
			t.over = append(t.over, fmt.Sprintf("%s %s after %v (limit %v)", kind, status, d.Round(time.Millisecond), limit))
		}
	}
}

// errStatus names a transport error briefly.
func errStatus(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "error"
}

func drive(c driveConfig, out io.Writer) (bool, error) {
	if err := waitReady(c.admin, 10*time.Second); err != nil {
		return false, err
	}
	cold, err := sample(c.admin, c.pid)
	if err != nil {
		return false, err
	}
	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: c.workers, DisableCompression: true},
		Timeout:   c.timeout + 10*time.Second, // well past the gateway's: to see a request that outlives it, not cut it
	}

	// The start is measured after a warm-up with the whole mix, once idle
	// again. A first wave of connections leaves the Go runtime larger for
	// good (it never frees a goroutine's descriptor, about 0.5 KiB, nor the
	// GC's and the allocator's metadata for the peak heap, a few percent
	// of it): bounded, but about half the cold RSS after a wave of 1,000
	// connections, so the cold figure cannot be the mark. But the memory a
	// wave takes must come back, mostly and promptly: at least two thirds
	// of the warm-up's rise above the cold RSS, within -settle; and then,
	// the soak must end where it started.
	fmt.Fprintf(out, "cold: RSS %.1f MB, %d goroutines; %s\n", cold.rssMB(), cold.goroutines, cold.detail())
	fmt.Fprintf(out, "warm-up: %v of the mix below\n", c.warmup)
	warm := newTally()
	warmPeak := cold
	_, warmLoris := mix(c, c.warmup, client, warm, func() {
		if s, err := sample(c.admin, c.pid); err == nil {
			warmPeak = warmPeak.max(s)
		}
	})
	returned := func(s snapshot) bool {
		rise := warmPeak.rss - cold.rss
		return rise < cold.rss/10 || s.rss-cold.rss <= rise/3 // a rise under 10% is no wave
	}
	start, waited, err := settle(c, 10*time.Second, returned)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(out, "start (%v after the warm-up, which peaked at RSS %.1f MB, %d goroutines): RSS %.1f MB, %d goroutines; %s\n",
		waited.Round(time.Second), warmPeak.rssMB(), warmPeak.goroutines, start.rssMB(), start.goroutines, start.detail())

	fmt.Fprintf(out, "load: %v of reads at %d/s, %d idle connections, %d slowloris, %d bad requests/s\n",
		c.duration, c.rate, c.idle, c.slowloris, c.abuseRate)
	t := newTally()
	peak := start
	lorisN, lorisMax := mix(c, c.duration, client, t, func() {
		if s, err := sample(c.admin, c.pid); err == nil {
			peak = peak.max(s)
		}
	})

	// Idle now: every client connection of ours is closed.
	end, settledAfter, err := settle(c, 0, func(s snapshot) bool { return s.within(start, c.tolerance) })
	if err != nil {
		return false, err
	}
	peak = peak.max(end)
	final, err := promtext.Scrape(c.admin)
	if err != nil {
		return false, err
	}

	fmt.Fprintln(out, "\nrequests by kind and status (slowest):")
	kinds := make([]string, 0, len(t.counts))
	for k := range t.counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		var parts []string
		for s, n := range t.counts[k] {
			parts = append(parts, fmt.Sprintf("%s:%d", s, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(out, "  %-18s %-50s (%v)\n", k, strings.Join(parts, " "), t.slowest[k].Round(time.Millisecond))
	}
	fmt.Fprintf(out, "  slowloris          %d connections, the longest closed by the gateway after %v\n", lorisN, lorisMax.Round(time.Millisecond))
	// The read series carry a route label (one route here: default).
	answered := final.Sum("tailgate_requests_total") - final.SumWith("tailgate_requests_total", `code="0"`)
	proxied := answered - final.Sum("tailgate_rejections_total")
	primary, hedge := final.SumWith("tailgate_attempts_total", `role="primary"`), final.SumWith("tailgate_attempts_total", `role="hedge"`)
	fmt.Fprintf(out, "\ngateway: %.0f answers, %.0f of them after backend attempts; attempts %.0f primary + %.0f hedge = %.3f per proxied answer; hedge wins %.0f\n",
		answered, proxied, primary, hedge, (primary+hedge)/max(proxied, 1), final.Sum("tailgate_hedge_wins_total"))
	fmt.Fprintf(out, "gateway status codes:")
	codes := final.ByLabel("tailgate_requests_total", "code")
	for _, k := range slices.Sorted(maps.Keys(codes)) {
		if codes[k] > 0 {
			fmt.Fprintf(out, " %s=%.0f", k, codes[k])
		}
	}
	fmt.Fprintf(out, "\nclient connections: refused %.0f, idle reclaimed %.0f\n",
		final["tailgate_client_connections_refused_total"], final["tailgate_client_connections_reclaimed_total"])
	fmt.Fprintf(out, "\n              %10s %10s %10s\n", "start", "peak", "end")
	fmt.Fprintf(out, "RSS (MB)      %10.1f %10.1f %10.1f\n", start.rssMB(), peak.rssMB(), end.rssMB())
	fmt.Fprintf(out, "goroutines    %10d %10d %10d\n", start.goroutines, peak.goroutines, end.goroutines)
	fmt.Fprintf(out, "end: %v after the load stopped; %s\n\n", settledAfter.Round(time.Second), end.detail())

	ok := true
	fail := func(format string, a ...any) { ok = false; fmt.Fprintf(out, "FAIL: "+format+"\n", a...) }
	if !returned(start) {
		fail("RSS %.1f MB %v after the warm-up: less than two thirds of its rise from %.1f to %.1f MB came back",
			start.rssMB(), waited.Round(time.Second), cold.rssMB(), warmPeak.rssMB())
	}
	if !end.within(start, c.tolerance) {
		fail("RSS %.1f MB or %d goroutines not back within %.0f%% of the start (%.1f MB, %d) %v after the load",
			end.rssMB(), end.goroutines, c.tolerance*100, start.rssMB(), start.goroutines, c.settle)
	}
	for _, x := range []struct {
		phase string
		t     *tally
	}{{"warm-up", warm}, {"load", t}} {
		if x.t.overN > 0 {
			fail("%s: %d requests outlived -timeout %v (+%v slack): %s", x.phase, x.t.overN, c.timeout, c.slack, strings.Join(x.t.over, "; "))
		}
	}
	if lorisMax = max(lorisMax, warmLoris); lorisMax > c.headerTimeout+c.slack {
		fail("a slowloris connection stayed open %v, past the header timeout %v (+%v)", lorisMax, c.headerTimeout, c.slack)
	}
	// Nothing of the load may be left once it is over: no request or
	// attempt in flight, no client connection counted open.
	for _, k := range []string{`tailgate_in_flight{kind="requests"}`, `tailgate_in_flight{kind="attempts"}`,
		`tailgate_client_connections{state="busy"}`, `tailgate_client_connections{state="idle"}`} {
		if v, ok := final[k]; !ok || v != 0 {
			fail("%s is %v once idle, want 0", k, v)
		}
	}
	if t.counts["read"]["200"] == 0 {
		fail("no normal read was answered 200")
	}
	// A request the gateway must refuse is never answered as if served.
	for _, x := range []*tally{warm, t} {
		for kind, byStatus := range x.counts {
			if !abuseKinds[kind] {
				continue
			}
			for status, n := range byStatus {
				if strings.HasPrefix(status, "2") {
					fail("%s answered %s %d times: it must be refused", kind, status, n)
				}
			}
		}
	}
	if ok {
		fmt.Fprintln(out, "PASS")
	}
	return ok, nil
}

// settle samples the gateway every 2s until ok holds of a sample taken
// atLeast after the call, or c.settle has passed, and returns the last
// sample and how long it waited. With the gateway's pid it watches RSS in
// /proc, which costs the gateway nothing, and scrapes /metrics only once
// RSS passes: every scrape allocates in the gateway, and an idle process
// collects that garbage only at its heap goal or every 2 minutes, so
// scraping every 2s would hold RSS up by the measurement itself (about
// 3 MB over a 90s wait, enough to fail a 10% bound that a quiet gateway
// meets).
func settle(c driveConfig, atLeast time.Duration, ok func(snapshot) bool) (snapshot, time.Duration, error) {
	begin := time.Now()
	for {
		time.Sleep(2 * time.Second)
		waited := time.Since(begin)
		if c.pid != 0 && waited <= c.settle {
			rss, err := procRSS(c.pid)
			if err == nil && (waited < atLeast || !ok(snapshot{rss: rss})) {
				continue
			}
		}
		s, err := sample(c.admin, c.pid)
		if err != nil || (waited >= atLeast && ok(s)) || waited > c.settle {
			return s, waited, err
		}
	}
}

// mix runs the whole mix for d: paced normal reads, idle connections,
// slowloris and bad requests, counted in t; every second it calls each
// (if not nil). It returns when every connection of the mix is closed,
// with the number of slowloris connections and the longest one's life.
func mix(c driveConfig, d time.Duration, client *http.Client, t *tally, each func()) (lorisN int, lorisMax time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { reads(ctx, c, client, t) })
	for i := range c.idle {
		wg.Go(func() { holdIdle(ctx, c, i, t) })
	}
	var mu sync.Mutex
	for range c.slowloris {
		wg.Go(func() {
			n, longest := slowloris(ctx, c)
			mu.Lock()
			lorisN += n
			lorisMax = max(lorisMax, longest)
			mu.Unlock()
		})
	}
	if c.abuseRate > 0 {
		wg.Go(func() { abuse(ctx, c, t) })
	}
	if each != nil {
		wg.Go(func() {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for sleepUntil(ctx, tick.C) {
				each()
			}
		})
	}
	wg.Wait()
	client.CloseIdleConnections()
	return lorisN, lorisMax
}

// sleepUntil waits for a tick and reports true, or false once ctx ends.
func sleepUntil(ctx context.Context, tick <-chan time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-tick:
		return true
	}
}

// reads sends normal reads at c.rate until ctx ends, at most c.workers at
// once; a read due while all are busy is counted as skipped.
func reads(ctx context.Context, c driveConfig, client *http.Client, t *tally) {
	limit := c.timeout + c.slack
	due := make(chan struct{})
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() {
			for range due {
				id := rand.IntN(1000)
				method := http.MethodGet
				if id%10 == 0 {
					method = http.MethodHead
				}
				req, _ := http.NewRequest(method, fmt.Sprintf("http://%s/item?id=%d", c.target, id), nil)
				begin := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					t.add("read", errStatus(err), time.Since(begin), limit)
					continue
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status := fmt.Sprint(resp.StatusCode)
				if err != nil {
					status += "+" + errStatus(err)
				}
				t.add("read", status, time.Since(begin), limit)
			}
		})
	}
	tick := time.NewTicker(time.Second / time.Duration(c.rate))
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
		select {
		case due <- struct{}{}:
		default:
			t.add("read", "skipped", 0, limit)
		}
	}
	close(due)
	wg.Wait()
}

// holdIdle keeps one connection open and idle after a read, reopening it
// when the gateway closes it (idle timeout, or reclaimed at -max-conns),
// until ctx ends. The first connections open over the first 10 seconds.
func holdIdle(ctx context.Context, c driveConfig, i int, t *tally) {
	if !sleep(ctx, time.Duration(i)*10*time.Second/time.Duration(max(c.idle, 1))) {
		return
	}
	limit := c.timeout + c.slack
	for ctx.Err() == nil {
		begin := time.Now()
		conn, err := net.DialTimeout("tcp", c.target, 5*time.Second)
		if err != nil {
			t.add("idle-read", errStatus(err), time.Since(begin), limit)
			sleep(ctx, time.Second)
			continue
		}
		status := rawRequest(conn, fmt.Sprintf("GET /item?id=%d HTTP/1.1\r\nHost: soak\r\n\r\n", i), http.MethodGet, c.timeout+10*time.Second)
		t.add("idle-read", status, time.Since(begin), limit)
		if status == "200" {
			// Idle until the gateway closes the connection or the load ends.
			stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
			conn.SetReadDeadline(time.Time{})
			idle := time.Now()
			_, err := conn.Read(make([]byte, 1))
			if ctx.Err() == nil {
				// Held as long as the gateway lets it: no limit here.
				t.add("idle-closed", errStatus(err), time.Since(idle), time.Duration(math.MaxInt64))
			}
			stop()
		}
		conn.Close()
		sleep(ctx, time.Second+rand.N(time.Second)) // a pause, so reclaimed connections do not churn
	}
}

// slowloris sends a request's headers a line a second on one connection
// after another until ctx ends, and returns how many connections it used
// and the longest the gateway kept one open.
func slowloris(ctx context.Context, c driveConfig) (n int, longest time.Duration) {
	for ctx.Err() == nil {
		begin := time.Now()
		conn, err := net.DialTimeout("tcp", c.target, 5*time.Second)
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		n++
		closed := make(chan struct{})
		go func() { io.Copy(io.Discard, conn); close(closed) }() // ends when the gateway closes
		io.WriteString(conn, "GET /item?id=1 HTTP/1.1\r\nHost: soak\r\n")
	lines:
		for i := 0; ; i++ {
			select {
			case <-closed:
				longest = max(longest, time.Since(begin))
				break lines
			case <-ctx.Done():
				break lines
			case <-time.After(time.Second):
				fmt.Fprintf(conn, "X-Slow-%d: x\r\n", i)
			}
		}
		conn.Close()
		<-closed
	}
	return n, longest
}

// abuseKinds are the kinds of request abuse sends, none of which may be
// served.
var abuseKinds = map[string]bool{"get-with-body": true, "get-chunked-body": true, "post": true, "put": true, "delete": true,
	"patch": true, "trace": true, "options-star": true, "connect": true, "unknown-method": true}

// abuse sends requests the gateway must refuse, in turn, c.abuseRate a
// second, each on a connection of its own, until ctx ends.
func abuse(ctx context.Context, c driveConfig, t *tally) {
	cases := []struct{ kind, method, raw string }{
		{"get-with-body", "GET", "GET /item?id=1 HTTP/1.1\r\nHost: soak\r\nContent-Length: 5\r\n\r\nhello"},
		{"get-chunked-body", "GET", "GET /item?id=1 HTTP/1.1\r\nHost: soak\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{"post", "POST", "POST /item HTTP/1.1\r\nHost: soak\r\nContent-Length: 2\r\n\r\n{}"},
		{"put", "PUT", "PUT /item HTTP/1.1\r\nHost: soak\r\nContent-Length: 0\r\n\r\n"},
		{"delete", "DELETE", "DELETE /item HTTP/1.1\r\nHost: soak\r\n\r\n"},
		{"patch", "PATCH", "PATCH /item HTTP/1.1\r\nHost: soak\r\nContent-Length: 0\r\n\r\n"},
		{"trace", "TRACE", "TRACE / HTTP/1.1\r\nHost: soak\r\n\r\n"},
		{"options-star", "OPTIONS", "OPTIONS * HTTP/1.1\r\nHost: soak\r\n\r\n"},
		{"connect", "CONNECT", "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n"},
		{"unknown-method", "BREW", "BREW /pot HTTP/1.1\r\nHost: soak\r\n\r\n"},
	}
	limit := c.timeout + c.slack
	tick := time.NewTicker(time.Second / time.Duration(c.abuseRate))
	defer tick.Stop()
	var wg sync.WaitGroup
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		cs := cases[i%len(cases)]
		wg.Go(func() {
			begin := time.Now()
			conn, err := net.DialTimeout("tcp", c.target, 5*time.Second)
			if err != nil {
				t.add(cs.kind, errStatus(err), time.Since(begin), limit)
				return
			}
			defer conn.Close()
			t.add(cs.kind, rawRequest(conn, cs.raw, cs.method, c.timeout+10*time.Second), time.Since(begin), limit)
		})
	}
}

// rawRequest writes raw on conn and returns the answer's status code, or a
// word for the error, having read the whole answer.
func rawRequest(conn net.Conn, raw, method string, wait time.Duration) string {
	conn.SetDeadline(time.Now().Add(wait))
	defer conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, raw); err != nil {
		return errStatus(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		return errStatus(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Sprintf("%d+%s", resp.StatusCode, errStatus(err))
	}
	return fmt.Sprint(resp.StatusCode)
}

// sleep waits for d or until ctx ends, and reports whether it was d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func waitReady(admin string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway at %s not ready within %v (last: %v)", admin, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
