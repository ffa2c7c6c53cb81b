// Command viagateway measures reads that carry a body through `tailgate
// serve`, from clients that are not Go: a Python grpcio client's unary
// calls to grpc-go servers, and a Python http.client's search POSTs to
// HTTP servers, each direct (the client spreading its calls over the two
// servers itself, round robin) and through the gateway (h2c from the
// client, a gRPC route and a POST route), on 127.0.0.1. Each server
// answers 5% of calls in 40 ms and the rest in 1 ms, each drawing its own
// stragglers; the gateway hedges after -hedge-delay. The servers count the
// calls they get, and those marked as hedges, so that attempts per call
// are counted where they land. The client calls one at a time (a real
// client's way: closed loop), -calls per run, and reports each call's
// latency as it saw it.
//
// It builds tailgate from the repository (or takes -tailgate), writes its
// config, runs it, and runs the clients (python3 with the grpc module:
// Debian's python3-grpcio). Each round runs the four in turn; the table
// gives the median over rounds of each figure, and curl's answer to one
// POST through the gateway, as a check that a plain client gets there.
//
//	cd grpc && go run ./bench/viagateway            # 3 rounds, about 2 minutes
//	cd grpc && go run ./bench/viagateway -rounds 1 -calls 500
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	hedgegrpc "github.com/tailgate-dev/tailgate/grpc"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	method     = "/bench.Search/Get"
	searchPath = "/products/_search"
	query      = `{"query":{"match":{"title":"tail at scale"}},"size":10}`
)

// straggle is a server's answer time: 5% of calls in 40 ms, the rest in 1 ms.
func straggle() time.Duration {
	if rand.Float64() < 0.05 {
		return 40 * time.Millisecond
	}
	return time.Millisecond
}

// counts are what one server saw.
type counts struct{ calls, hedges atomic.Int64 }

func (c *counts) saw(hedge bool) {
	c.calls.Add(1)
	if hedge {
		c.hedges.Add(1)
	}
}

// grpcServer serves bench.Search/Get, a StringValue echoed back after
// straggle().
func grpcServer(c *counts) (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	srv := grpc.NewServer()
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "bench.Search",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Get", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			c.saw(hedgegrpc.IsHedge(ctx))
			sleep(ctx, straggle())
			return wrapperspb.String("hit:" + in.GetValue()), nil
		}}},
	}, nil)
	go srv.Serve(ln)
	return ln.Addr().String(), srv.Stop
}

// httpServer answers POST searchPath with a small JSON result after
// straggle(), having read the query.
func httpServer(c *counts) (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || string(body) != query {
			http.Error(w, "want the query", http.StatusBadRequest)
			return
		}
		c.saw(r.Header.Get("Tailgate-Hedge") != "")
		sleep(r.Context(), straggle())
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"hits":{"total":1,"hits":[{"_id":"1"}]}}`)
	})}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done(): // a hedge's loser
	}
}

// client is the Python client: mode grpc calls method on target with
// grpcio (round robin over a list of addresses), mode http POSTs the
// query to each base URL in turn with http.client (one keep-alive
// connection each); it prints the latencies in milliseconds, as JSON.
const client = `
import json, sys, time
mode, targets, n = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
lat, failed = [], 0
if mode == "grpc":
    import grpc
    target = targets[0] if len(targets) == 1 else "ipv4:" + ",".join(targets)
    ch = grpc.insecure_channel(target, options=[("grpc.lb_policy_name", "round_robin")])
    get = ch.unary_unary("` + method + `")
    req = b"\x0a\x04tail"  # a StringValue, encoded by hand: no generated code needed
    def one():
        return get(req, timeout=2).endswith(b"hit:tail")
else:
    import http.client
    from urllib.parse import urlsplit
    conns = [http.client.HTTPConnection(urlsplit(t).netloc, timeout=2) for t in targets]
    i = [0]
    def one():
        c = conns[i[0] % len(conns)]; i[0] += 1
        c.request("POST", "` + searchPath + `", body=` + "'" + query + "'" + `, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status == 200 and b"hits" in r.read()
for _ in range(50):  # warm up: connections, the gateway's picks
    one()
for _ in range(n):
    t = time.perf_counter()
    try:
        ok = one()
    except Exception:
        ok = False
    lat.append((time.perf_counter() - t) * 1000)
    failed += not ok
print(json.dumps({"lat": lat, "failed": failed}))
`

// python runs the client.
var python string

type result struct {
	p50, p99, attempts float64
	failed             int
}

func main() {
	rounds := flag.Int("rounds", 3, "rounds, each running the four clients in turn")
	calls := flag.Int("calls", 2000, "calls per run")
	delay := flag.String("hedge-delay", "5ms", "the gateway's -hedge-delay")
	tailgate := flag.String("tailgate", "", "the tailgate binary (default: built from the repository)")
	verbose := flag.Bool("v", false, "print the gateway's hedge metrics after each run through it")
	flag.StringVar(&python, "python", "/usr/bin/python3", "the Python with grpcio (Debian's python3-grpcio installs into the system's)")
	flag.Parse()
	dir, err := os.MkdirTemp("", "viagateway")
	check(err)
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "client.py")
	check(os.WriteFile(script, []byte(client), 0o644))
	if *tailgate == "" {
		*tailgate = filepath.Join(dir, "tailgate")
		build := exec.Command("go", "build", "-o", *tailgate, "./cmd/tailgate")
		build.Dir = ".." // the main module, from grpc/
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		check(build.Run())
	}

	var gc, hc [2]counts
	var grpcAddrs, httpURLs []string
	for i := range 2 {
		a, stop := grpcServer(&gc[i])
		defer stop()
		grpcAddrs = append(grpcAddrs, a)
		u, stopH := httpServer(&hc[i])
		defer stopH()
		httpURLs = append(httpURLs, u)
	}
	cfg := filepath.Join(dir, "tailgate.yaml")
	check(os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
backends: [%s, %s]
hedge-delay: %s
timeout: 2s
routes:
  - name: search
    match: %s
    methods: [POST]
  - name: grpc
    match: /bench.Search/
    grpc: [Get]
    backends: [http://%s, http://%s]
`, httpURLs[0], httpURLs[1], *delay, searchPath, grpcAddrs[0], grpcAddrs[1])), 0o644))
	addr, admin, stop := runTailgate(*tailgate, cfg)
	defer stop()

	curl, err := exec.Command("curl", "-sS", "-X", "POST", "-H", "Content-Type: application/json", "--data", query, "-w", " %{http_code}", "http://"+addr+searchPath).CombinedOutput()
	fmt.Printf("curl POST through the gateway: %s\n", strings.TrimSpace(string(curl)))
	if err != nil {
		fmt.Printf("curl: %v\n", err)
	}

	runs := map[string][]result{}
	names := []string{"grpc direct", "grpc via tailgate", "POST direct", "POST via tailgate"}
	for r := range *rounds {
		for _, name := range names {
			mode, targets, cs := "grpc", grpcAddrs, &gc
			if strings.HasPrefix(name, "POST") {
				mode, targets, cs = "http", httpURLs, &hc
			}
			if strings.HasSuffix(name, "tailgate") {
				targets = []string{addr}
				if mode == "http" {
					targets = []string{"http://" + addr}
				}
			}
			res := run(script, mode, targets, *calls, cs)
			fmt.Fprintf(os.Stderr, "round %d %-18s p50 %5.2f ms  p99 %6.2f ms  attempts/call %.3f  failed %d\n", r+1, name, res.p50, res.p99, res.attempts, res.failed)
			if strings.HasSuffix(name, "tailgate") && *verbose {
				metrics(admin)
			}
			runs[name] = append(runs[name], res)
		}
	}
	fmt.Printf("\nmedians of %d rounds, %d calls each, hedge delay %s (Python client, one call at a time):\n\n", *rounds, *calls, *delay)
	fmt.Println("| client | p50 | p99 | attempts per call | failed |")
	fmt.Println("| --- | --- | --- | --- | --- |")
	for _, name := range names {
		rs := runs[name]
		fmt.Printf("| %s | %.2f ms | %.2f ms | %.3f | %d |\n", name,
			median(rs, func(r result) float64 { return r.p50 }), median(rs, func(r result) float64 { return r.p99 }),
			median(rs, func(r result) float64 { return r.attempts }), int(median(rs, func(r result) float64 { return float64(r.failed) })))
	}
	for _, kind := range []string{"grpc", "POST"} {
		d := median(runs[kind+" direct"], func(r result) float64 { return r.p99 })
		v := median(runs[kind+" via tailgate"], func(r result) float64 { return r.p99 })
		fmt.Printf("\n%s: p99 %.1f -> %.1f ms (%.1fx lower)", kind, d, v, d/v)
	}
	fmt.Println()
}

// run runs the Python client once and counts the servers' attempts.
func run(script, mode string, targets []string, calls int, cs *[2]counts) result {
	before := cs[0].calls.Load() + cs[1].calls.Load()
	out, err := exec.Command(python, script, mode, strings.Join(targets, ","), fmt.Sprint(calls)).Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "python3 client (%s): %v\n", mode, err)
		os.Exit(1)
	}
	var res struct {
		Lat    []float64
		Failed int
	}
	check(json.Unmarshal(out, &res))
	time.Sleep(100 * time.Millisecond) // losers land
	attempts := float64(cs[0].calls.Load()+cs[1].calls.Load()-before) / float64(calls+50)
	slices.Sort(res.Lat)
	q := func(p float64) float64 { return res.Lat[min(len(res.Lat)-1, int(p*float64(len(res.Lat))))] }
	return result{p50: q(0.5), p99: q(0.99), attempts: attempts, failed: res.Failed}
}

// metrics prints the gateway's counters of hedges and attempts.
func metrics(admin string) {
	resp, err := http.Get("http://" + admin + "/metrics")
	check(err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "tailgate_attempts_total") || strings.HasPrefix(l, "tailgate_hedges_suppressed_total") ||
			strings.HasPrefix(l, "tailgate_hedge_wins_total") || strings.HasPrefix(l, "tailgate_attempt_failures_total") && !strings.HasSuffix(l, " 0") {
			fmt.Fprintln(os.Stderr, "   ", l)
		}
	}
}

// runTailgate starts tailgate serve with cfg and returns its client and
// admin addresses, from its log.
func runTailgate(bin, cfg string) (string, string, func()) {
	cmd := exec.Command(bin, "serve", "-config", cfg, "-log-level", "info")
	stderr, err := cmd.StderrPipe()
	check(err)
	check(cmd.Start())
	addr, admin := make(chan string, 1), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, `msg="gateway listening" addr=`); i >= 0 {
				addr <- strings.Fields(line[i+len(`msg="gateway listening" addr=`):])[0]
			} else if i := strings.Index(line, `msg="admin listening" addr=`); i >= 0 {
				admin <- strings.Fields(line[i+len(`msg="admin listening" addr=`):])[0]
			} else if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
				fmt.Fprintln(os.Stderr, "tailgate:", line)
			}
		}
	}()
	var a, m string
	for a == "" || m == "" {
		select {
		case a = <-addr:
		case m = <-admin:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			fmt.Fprintln(os.Stderr, "tailgate did not start")
			os.Exit(1)
		}
	}
	return a, m, func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }
}

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
