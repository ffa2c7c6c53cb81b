// Command proxies runs the Go programs bench/gateway.sh compares the
// gateway with: a trivial backend, and a plain httputil.ReverseProxy in
// front of it; and, for profiles, the gateway itself in-process with a CPU
// profile of a given stretch of its life; and a bare forwarder on the
// gateway's own HTTP/1 server and client, a baseline for what is under the
// engine. All bind loopback only.
//
//	proxies backend -listen 127.0.0.1:18081
//	proxies reverseproxy -listen 127.0.0.1:18082 -backend http://127.0.0.1:18081
//	proxies gateway -listen 127.0.0.1:18085 -backend http://127.0.0.1:18081 \
//	        -cpuprofile gw.pprof -profile-after 2s -profile-for 10s
//	proxies gateway -listen 127.0.0.1:18085 -backend http://127.0.0.1:18081,http://127.0.0.1:18082 \
//	        -attempts 1 -debug 127.0.0.1:18095
//	proxies bare -listen 127.0.0.1:18086 -backend http://127.0.0.1:18081
//
// With -debug, the gateway mode serves net/http/pprof (curl
// .../debug/pprof/trace?seconds=2 for a runtime trace; with -contention,
// the mutex and block profiles are sampled, .../debug/pprof/mutex) and
// /debug/gc: the garbage collector's work since the last look at it, from
// runtime/metrics (cycles, stop-the-world pauses, the CPU time of its mark
// assists and workers, the heap), which is where issue 27 looked for the
// gateway's own tail; /debug/gc/cycles lists the recent collections, for
// bench/tail gcjoin.
//
// The gateway mode builds the gateway as tailgate serve does (gateway.New,
// Gateway.PlainServer, -client-server h1 or net/http) with serve's defaults, the limits bench/gateway.sh gives
// serve, and no admin listener; it lacks only serve's connection limit.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	httppprof "net/http/pprof"
	"net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/internal/h1"
	"github.com/tailgate-dev/tailgate/internal/h1server"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: proxies backend|reverseproxy|gateway|bare [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on")
	backend := fs.String("backend", "", "backend base URL (reverseproxy, bare; gateway: comma-separated, several)")
	cpuprofile := fs.String("cpuprofile", "", "gateway: write a CPU profile here")
	after := fs.Duration("profile-after", 2*time.Second, "gateway: start the profile this long after listening")
	span := fs.Duration("profile-for", 10*time.Second, "gateway: profile this long")
	clientServer := fs.String("client-server", "h1", "gateway: the server of its clients, h1 or net/http (as tailgate serve's flag)")
	watchAfter := fs.Duration("watch-after", 0, "gateway: h1server's WatchAfter (0: its default)")
	attempts := fs.Int("attempts", 0, "gateway: attempts per request (1: hedging off; 0: the default)")
	contention := fs.Bool("contention", false, "gateway, with -debug: sample the mutex and block profiles")
	debug := fs.String("debug", "", "gateway: loopback address for net/http/pprof (the mutex and block profiles on) and /debug/gc, the runtime's GC figures since the last look")
	fs.Parse(os.Args[2:])
	if host, _, err := net.SplitHostPort(*listen); err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("-listen %q: want a loopback address", *listen)
	}
	var srv *http.Server
	switch os.Args[1] {
	case "backend":
		body := []byte(`{"value":"0123456789abcdef"}` + "\n")
		srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		})}
	case "reverseproxy":
		u := backendURL(*backend)
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256 // as the gateway's pool: a fair comparison
		srv = &http.Server{Handler: &httputil.ReverseProxy{
			Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(u); r.SetXForwarded() },
			Transport: t,
			ErrorLog:  quiet, // "context canceled" for each connection wrk leaves with a request out
		}}
	case "gateway":
		backends := strings.Split(*backend, ",")
		for _, b := range backends {
			backendURL(b)
		}
		cfg := gateway.Config{Backends: backends, MaxInFlightRequests: 1024, MaxInFlightAttempts: 2048}
		cfg.Policy.MaxAttempts = *attempts
		g, err := gateway.New(cfg)
		if err != nil {
			log.Fatal(err)
		}
		if *cpuprofile != "" {
			go profile(*cpuprofile, *after, *span)
		}
		if *debug != "" {
			go serveDebug(*debug, *contention)
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			log.Fatal(err)
		}
		srv := g.Server(gateway.ServerConfig{}) // as tailgate serve serves plain-HTTP clients
		if *clientServer == "h1" {
			h := h1server.Like(srv, g)
			if *watchAfter != 0 {
				h.WatchAfter = *watchAfter
			}
			log.Fatal(h.Serve(ln))
		}
		log.Fatal(srv.Serve(ln))
	case "bare":
		// A naive baseline on the gateway's own client-facing server and
		// backend client (internal/h1server, internal/h1): a handler that
		// sends a GET or HEAD's path, query and headers on and copies the
		// answer back: no engine, no steering, no limits, no added
		// headers, no checks (hop-by-hop headers pass, bodies are not
		// sent). A measuring tool for bench's GETs, never a proxy to
		// deploy (docs/performance.md).
		u := backendURL(*backend)
		t, err := h1.New(h1.Config{MaxIdlePerHost: 256})
		if err != nil {
			log.Fatal(err)
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			log.Fatal(err)
		}
		h := h1server.Like(&http.Server{ReadHeaderTimeout: 5 * time.Second}, bareHandler(t, u))
		log.Fatal(h.Serve(ln))
	default:
		log.Fatalf("unknown mode %q", os.Args[1])
	}
	srv.Addr = *listen
	if srv.ReadHeaderTimeout == 0 {
		srv.ReadHeaderTimeout = 5 * time.Second
	}
	log.Fatal(srv.ListenAndServe())
}

var quiet = log.New(io.Discard, "", 0)

// bareHandler sends each GET or HEAD on to backend through t, its path,
// query and header as they came (the header shared, not copied: h1 only
// reads it), and copies the answer back.
func bareHandler(t http.RoundTripper, backend *url.URL) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := &http.Request{
			Method: r.Method, URL: &url.URL{Scheme: backend.Scheme, Host: backend.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery},
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: r.Header, Host: backend.Host,
		}
		out = out.WithContext(r.Context())
		resp, err := t.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})
}

func backendURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		log.Fatalf("-backend %q: want a URL", s)
	}
	return u
}

// profile writes a CPU profile of the span that starts after the given
// delay to path.
func profile(path string, after, span time.Duration) {
	time.Sleep(after)
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	time.Sleep(span)
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	log.Printf("CPU profile written to %s", path)
}

// serveDebug serves net/http/pprof and /debug/gc on addr (loopback).
func serveDebug(addr string, contention bool) {
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("-debug %q: want a loopback address", addr)
	}
	if contention {
		// One contention event in 5 sampled, blocking of 10µs and more:
		// enough for a profile of a run of seconds. Not on by default: the
		// block profile's stack walks cost enough to move a p99.
		runtime.SetMutexProfileFraction(5)
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	}
	var last gcFigures
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", httppprof.Index)
	mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
	mux.HandleFunc("/debug/gc", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		now := readGC()
		fmt.Fprint(w, now.since(last))
		last = now
	})
	mux.HandleFunc("/debug/gc/cycles", func(w http.ResponseWriter, r *http.Request) {
		// The recent collections, when each ended (wall clock) and how
		// long its pauses took; GODEBUG=gctrace=1's line of the same
		// number says how long it ran (bench/tail gcjoin puts the two
		// together).
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		for n := max(int(m.NumGC)-len(m.PauseEnd), 0) + 1; n <= int(m.NumGC); n++ {
			i := (n + len(m.PauseEnd) - 1) % len(m.PauseEnd)
			fmt.Fprintf(w, "gc %d end %d pause %d\n", n, m.PauseEnd[i], m.PauseNs[i])
		}
	})
	log.Fatal(http.ListenAndServe(addr, mux))
}

// gcFigures are the collector's cumulative figures, from runtime/metrics.
type gcFigures struct {
	at                 time.Time
	cycles             uint64
	pauses             *metrics.Float64Histogram // stop-the-world pauses
	assistCPU, gcCPU   float64                   // seconds: mark assists by the program's goroutines; all GC work
	totalCPU           float64                   // busy: all less idle
	heapLive, heapGoal uint64
	allocBytes, allocs uint64
	goroutines         uint64
	schedLat           *metrics.Float64Histogram // time goroutines waited runnable
	created            uint64                    // goroutines started
	stopping           *metrics.Float64Histogram // of each GC pause, the time it took to stop the world
}

var gcSamples = []string{
	"/gc/cycles/total:gc-cycles",
	"/sched/pauses/total/gc:seconds",
	"/cpu/classes/gc/mark/assist:cpu-seconds",
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
	"/cpu/classes/idle:cpu-seconds",
	"/gc/heap/live:bytes",
	"/gc/heap/goal:bytes",
	"/gc/heap/allocs:bytes",
	"/gc/heap/allocs:objects",
	"/sched/goroutines:goroutines",
	"/sched/latencies:seconds",
	"/sched/goroutines-created:goroutines",
	"/sched/pauses/stopping/gc:seconds",
}

func readGC() gcFigures {
	s := make([]metrics.Sample, len(gcSamples))
	for i, n := range gcSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	return gcFigures{
		at: time.Now(), cycles: s[0].Value.Uint64(), pauses: s[1].Value.Float64Histogram(),
		assistCPU: s[2].Value.Float64(), gcCPU: s[3].Value.Float64(), totalCPU: s[4].Value.Float64() - s[5].Value.Float64(),
		heapLive: s[6].Value.Uint64(), heapGoal: s[7].Value.Uint64(), allocBytes: s[8].Value.Uint64(), allocs: s[9].Value.Uint64(),
		goroutines: s[10].Value.Uint64(), schedLat: s[11].Value.Float64Histogram(),
		created: s[12].Value.Uint64(), stopping: s[13].Value.Float64Histogram(),
	}
}

// since reports what changed from last (zero: since the start).
func (g gcFigures) since(last gcFigures) string {
	span := g.at.Sub(last.at)
	if last.at.IsZero() {
		span = 0
	}
	return fmt.Sprintf("over %v: %d GC cycles; stop-the-world pauses: %s; GC CPU %.3fs (of it mark assists %.3fs) of the process's %.3fs; "+
		"of which stopping the world: %s; allocated %d objects, %d bytes; heap live %d, goal %d; goroutines %d, %d started; "+
		"runnable goroutines waited: %s\n",
		span.Round(time.Millisecond), g.cycles-last.cycles, histDelta(g.pauses, last.pauses), g.gcCPU-last.gcCPU, g.assistCPU-last.assistCPU,
		g.totalCPU-last.totalCPU, histDelta(g.stopping, last.stopping), g.allocs-last.allocs, g.allocBytes-last.allocBytes, g.heapLive, g.heapGoal,
		g.goroutines, g.created-last.created, histDelta(g.schedLat, last.schedLat))
}

// histDelta summarises the samples a histogram gained since last (nil:
// all): count, p50, p99, max, each to its bucket's upper bound.
func histDelta(h, last *metrics.Float64Histogram) string {
	counts := slices.Clone(h.Counts)
	if last != nil {
		for i := range counts {
			counts[i] -= last.Counts[i]
		}
	}
	var n uint64
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		return "none"
	}
	q := func(f float64) time.Duration {
		want, seen := uint64(math.Ceil(f*float64(n))), uint64(0)
		for i, c := range counts {
			seen += c
			if seen >= want {
				return time.Duration(math.Min(h.Buckets[i+1], 3600) * 1e9)
			}
		}
		return 0
	}
	return fmt.Sprintf("%d, p50 %v p99 %v max %v", n, q(0.5), q(0.99), q(1))
}
