package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/connlimit"
	"github.com/tailgate-dev/tailgate/internal/discovery"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
)

const serveSynopsis = `Runs the read gateway: a reverse proxy for GET and HEAD that sends each
request to a primary replica chosen by latency and, when the answer is late,
a hedge to a different replica, keeping the first acceptable answer. With
-tied, each read is a tied request instead (the backends must run
tied.Server). Metrics and health checks are on a separate admin address.
Backends may be https:// (HTTP/2 by ALPN; -backend-ca, -backend-cert);
with -tls-cert and -tls-key clients connect over TLS, HTTP/2 included.
Flags may come from a -config file; SIGHUP re-reads it and applies what
can change live. SIGINT or SIGTERM drains requests in flight and exits 0.
The modes, the probation and tied rules, and the metrics: docs/gateway.md.

  tailgate serve -backends http://127.0.0.1:8081,http://127.0.0.1:8082 \
    -listen 127.0.0.1:8080 -admin 127.0.0.1:9090 \
    -hedge-delay 25ms -hedge-fraction 0.1 -max-requests 128 -max-attempts 160`

type serveFlags struct {
	backends       string
	listen, admin  string
	delay          string
	fraction       float64
	burst          float64
	attempts       int
	maxRequests    int
	maxAttempts    int
	timeout        time.Duration
	maxBody        int64
	maxRespHeader  int64
	gate           bool
	gateWindow     time.Duration
	gateWinRate    float64
	gateSlowdown   float64
	protocol       string
	drain          time.Duration
	maxHeaderBytes int
	maxConns       int
	clientServer   string
	logFormat      string
	logLevel       string
	accessLog      string
	accessSample   float64
	probation      bool
	probFactor     float64
	probMinExcess  time.Duration
	probWindow     time.Duration
	probMaxShare   float64
	shadowRate     float64
	tied           bool
	tiedDelay      time.Duration
	trustedHop     bool
	configFile     string
	drainDelay     time.Duration
	enableReload   bool
	tlsFlags       // -tls-*, -backend-ca and the like (servetls.go)
	affinityFlags  // -affinity-key and the partition knobs (serveaffinity.go)
	dnsRefresh     time.Duration
	dnsServer      string
	traceEndpoint  string
	traceSample    float64

	fs *flag.FlagSet // to tell the flags given from defaults
	// kept are the flags a reload set back to their running values (they
	// need a restart) that were not given at start: not counted as given.
	kept map[string]bool
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// From here on SIGHUP reloads the configuration (see serveReloading)
	// rather than ending the process, as it would by default; one that
	// comes before the serve loop runs waits in the channel.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	f, code, err := loadServeFlags(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if err != nil {
		return usageError(stderr, "serve", err)
	}
	cfg, logger, err := f.config(stderr)
	if err != nil {
		return usageError(stderr, "serve", err)
	}
	// Built here, once, not in config, which each reload calls again.
	tp, err := f.tracerProvider(logger)
	if err != nil {
		return usageError(stderr, "serve", err)
	}
	if tp != nil {
		cfg.TracerProvider = tp
		defer shutdownTracing(tp, logger) // after g.Close: its shadows' spans end there
	}
	w := newWatcher(f, logger)
	g, cfg, err := newGateway(ctx, w, cfg)
	if errors.Is(err, discovery.ErrNoBackends) {
		logger.Error("serve failed", "err", err) // DNS's answer, not the command line's
		return exitError
	}
	if err != nil {
		return usageError(stderr, "serve", err)
	}
	defer g.Close()
	warnSameServer(ctx, logger, cfg.Backends, nil)
	f.warnBackendTLSUnused(logger, cfg.Backends)
	r := &reloader{args: args, g: g, log: logger, disc: w}
	r.running.Store(f)
	if err := r.loadCerts(f); err != nil {
		return usageError(stderr, "serve", err)
	}
	gcCtx, stopGC := context.WithCancel(ctx)
	gcDone := make(chan struct{})
	go func() { keepGCFloor(gcCtx, logger); close(gcDone) }() // see gcfloor.go
	defer func() { stopGC(); <-gcDone }()
	if err := serveReloading(ctx, g, r, hup); err != nil {
		// Once, through the logger that wrote every line before it, in
		// the format asked for.
		logger.Error("serve failed", "err", err)
		return exitError
	}
	return exitOK
}

// register defines the serve flags on fs, to be parsed into f.
func (f *serveFlags) register(fs *flag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.backends, "backends", "", "comma-separated base URLs of the replicas (required; at least one, no duplicates)"+dnsFlagsHelp)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address for client traffic")
	fs.StringVar(&f.admin, "admin", "127.0.0.1:9090", `address for /healthz, /readyz, /metrics and /debug/replicas ("" disables)`)
	fs.StringVar(&f.delay, "hedge-delay", "auto", `hedge delay: a duration ("25ms"), "auto" (adaptive p95) or a percentile ("p99")`)
	fs.Float64Var(&f.fraction, "hedge-fraction", hedge.DefaultBudgetFraction, "hedge budget: extra attempts earned per request, in [0, 1] (with -tied, 1 unless given)")
	fs.Float64Var(&f.burst, "hedge-burst", hedge.DefaultBudgetBurst, "hedge budget: most hedges that may go out in a row (>= 1; with -tied, at least -max-requests unless given)")
	fs.IntVar(&f.attempts, "attempts-per-request", hedge.DefaultMaxAttempts, fmt.Sprintf("attempts per request, the primary included (1 disables hedging; at most %d; with -tied, 2)", hedge.MaxAttemptsCap))
	fs.IntVar(&f.maxRequests, "max-requests", gateway.DefaultMaxInFlightRequests, "client requests in flight; beyond it: 503 with Retry-After")
	fs.IntVar(&f.maxAttempts, "max-attempts", 0, "backend attempts in flight; a hedge without a free slot is not sent (0: max-requests × 1.25, × 2 with -tied)")
	fs.DurationVar(&f.timeout, "timeout", gateway.DefaultTimeout, "per-request time limit, hedges included; then 504")
	fs.Int64Var(&f.maxBody, "max-response-bytes", gateway.DefaultMaxResponseBytes, "largest backend response body forwarded; larger: 502")
	fs.Int64Var(&f.maxRespHeader, "max-response-header-bytes", gateway.DefaultMaxResponseHeaderBytes, fmt.Sprintf("largest backend response header block read; larger: the attempt fails (502 if none succeeds), within [%d, %d]", gateway.MinResponseHeaderBytes, gateway.MaxResponseHeaderBytesLimit))
	fs.BoolVar(&f.gate, "gate", true, "overload gate: pause hedges for late answers on evidence of overload (false turns it off; the budget still bounds hedges)")
	fs.DurationVar(&f.gateWindow, "gate-window", hedge.DefaultGateWindow, "overload gate: how far back hedge outcomes count; it reopens within one window of the overload ending")
	fs.Float64Var(&f.gateWinRate, "gate-min-win-rate", hedge.DefaultGateMinWinRate, "overload gate: shut when fewer hedges than this share win (the alternates are as slow), in (0, 0.5]")
	fs.Float64Var(&f.gateSlowdown, "gate-slowdown", hedge.DefaultGateSlowdown, "overload gate: shut when the median latency reaches this many times its baseline and hedges do not clearly win (>= 1)")
	fs.StringVar(&f.protocol, "backend-protocol", gateway.ProtocolHTTP1, `protocol to http:// replicas: "http1" or "h2c" (https:// replicas negotiate HTTP/2 or HTTP/1.1 by ALPN)`)
	fs.DurationVar(&f.drain, "drain-timeout", 15*time.Second, "on SIGINT/SIGTERM, how long requests in flight may take to finish")
	fs.IntVar(&f.maxHeaderBytes, "max-header-bytes", gateway.DefaultMaxHeaderBytes, "largest request line and header block accepted from clients; larger: 431")
	fs.StringVar(&f.clientServer, "client-server", gateway.PlainH1, `the server of plain-HTTP clients: "h1" (the gateway's own, internal/h1server) or "net/http" (Go's, as before: a fallback); clients over TLS are served by net/http either way; needs a restart to change`)
	fs.IntVar(&f.maxConns, "max-conns", defaultMaxConns, "client connections open at once (about 22 KiB each when idle); beyond it a new connection closes the longest-idle keep-alive one, or is refused (reset) when none is idle")
	fs.StringVar(&f.logFormat, "log-format", "text", `log format: "text" or "json"`)
	fs.StringVar(&f.logLevel, "log-level", "info", `log level: "debug", "info", "warn" or "error"`)
	fs.StringVar(&f.accessLog, "access-log", "off", `access log: "on" writes one line per request (method, path, status, bytes, duration, replica, attempts, hedged, hedgeWon, reason, client) with the log, in -log-format, whatever -log-level; "off" writes none`)
	fs.Float64Var(&f.accessSample, "access-log-sample", 1, "access log: the share of requests logged, chosen at random, in (0, 1] (0.01: about one in a hundred)")
	fs.BoolVar(&f.probation, "probation", true, "latency-induced probation of replicas much slower than their peers (false turns it off)")
	fs.Float64Var(&f.probFactor, "probation-factor", replica.DefaultProbationFactor, "probation: how many times its peers' median latency a replica's median must exceed (> 1)")
	fs.DurationVar(&f.probMinExcess, "probation-min-excess", replica.DefaultProbationMinExcess, "probation: how much, at least, a replica's median must exceed its peers', as well as -probation-factor times (0: no floor, the ratio alone)")
	fs.DurationVar(&f.probWindow, "probation-window", replica.DefaultProbationWindow, "probation: how long a divergence, or a recovery, must last (> 0)")
	fs.Float64Var(&f.probMaxShare, "probation-max-share", replica.DefaultProbationMaxShare, "probation: most replicas on probation at once, as a share in (0, 1] (rounded down, but at least 1 of 2 or more, never all)")
	fs.Float64Var(&f.shadowRate, "shadow-rate", replica.DefaultShadowRate, "probation: shadow requests per second to each replica on probation (copies of answered reads, marked Tailgate-Shadow: 1, answers discarded; > 0)")
	fs.BoolVar(&f.tied, "tied", false, "tied requests instead of hedging: each read also goes, -tied-delay later, to a second replica, the copies naming each other's backend (Tailgate-Tie, Tailgate-Tie-Peer); the backends must run tied.Server with the other backends in its Peers, or every read runs twice; needs two backends or more")
	fs.BoolVar(&f.trustedHop, "trusted-hop", false, "the clients are a trusted proxy (another Tailgate gateway, a load balancer): keep their Tailgate-Hedge and Tailgate-Shadow marks and X-Forwarded-* headers, appending to X-Forwarded-For; false removes every Tailgate-* and client-address header (Forwarded, X-Forwarded-*, X-Real-Ip, True-Client-Ip) from client requests and sets X-Forwarded-For, -Host and -Proto afresh")
	fs.DurationVar(&f.tiedDelay, "tied-delay", tied.DefaultDelay, "tied: how long the first copy waits alone before the second is sent (0 or negative: both at once)")
	fs.StringVar(&f.configFile, "config", "", `YAML (or JSON) file of flag settings, each key a flag's name ("backends: [http://127.0.0.1:8081, http://127.0.0.1:8082]", "hedge-delay: 25ms"); flags on the command line win. SIGHUP re-reads it and applies what can change live; -listen, -admin, -tied, -backend-protocol, the log and connection settings need a restart`)
	fs.DurationVar(&f.drainDelay, "drain-delay", 0, "on SIGINT/SIGTERM, how long /readyz answers 503 while requests are still served, before the listener closes, for load balancers to stop sending: their health-check interval × unhealthy threshold (0: close at once)")
	fs.BoolVar(&f.enableReload, "enable-reload-endpoint", false, "serve POST /-/reload on the admin address, which reloads the configuration as SIGHUP does")
	f.registerTLS(fs)
	f.registerDNS(fs)
	f.registerAffinity(fs)
	fs.StringVar(&f.traceEndpoint, "trace-otlp-endpoint", "", `OpenTelemetry tracing: the collector's OTLP/HTTP base URL, such as http://127.0.0.1:4318 (spans go to its /v1/traces): a span per read and per attempt (primary, hedge, tied copy, shadow), each replica sent its attempt's traceparent; "" (the default) traces nothing`)
	fs.Float64Var(&f.traceSample, "trace-sample", 1, "tracing: the share of reads traced, chosen by trace id, in [0, 1], for reads whose client sent no sampled traceparent (a client's sampling decision is kept)")
}

// config turns the flags into a gateway configuration and a logger.
func (f serveFlags) config(stderr io.Writer) (gateway.Config, *slog.Logger, error) {
	var cfg gateway.Config
	if strings.TrimSpace(f.backends) == "" {
		return cfg, nil, errors.New("-backends is required: comma-separated replica URLs such as http://127.0.0.1:8081,http://127.0.0.1:8082")
	}
	for _, b := range strings.Split(f.backends, ",") {
		cfg.Backends = append(cfg.Backends, strings.TrimSpace(b))
	}
	if err := f.checkDNS(cfg.Backends); err != nil {
		return cfg, nil, err
	}
	if err := f.checkTLS(); err != nil {
		return cfg, nil, err
	}
	backendTLS, err := f.backendTLS()
	if err != nil {
		return cfg, nil, err
	}
	cfg.BackendTLS = backendTLS
	fixed, q, err := hedge.ParseDelay(f.delay)
	if err != nil {
		return cfg, nil, fmt.Errorf("-hedge-delay: %w", err)
	}
	given := map[string]bool{}
	if f.fs != nil {
		f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = !f.kept[fl.Name] })
	}
	fraction, burst := f.fraction, f.burst
	if f.tied {
		switch {
		case given["hedge-delay"]:
			return cfg, nil, errors.New("-hedge-delay does not apply with -tied: the second copy goes after -tied-delay")
		case given["gate"] || given["gate-window"] || given["gate-min-win-rate"] || given["gate-slowdown"]:
			return cfg, nil, errors.New("the -gate flags do not apply with -tied: the overload gate is off, since every read wants its second copy")
		case f.attempts != 2:
			return cfg, nil, fmt.Errorf("-attempts-per-request %d does not apply with -tied: a tied request is two copies", f.attempts)
		case f.tiedDelay >= f.timeout:
			return cfg, nil, fmt.Errorf("-tied-delay %v must be shorter than -timeout %v", f.tiedDelay, f.timeout)
		}
		fixed, q = 0, 0
		if !given["hedge-fraction"] {
			fraction = 1 // every read may be tied: at most one extra copy a read
		}
		if !given["hedge-burst"] {
			// Room for the credit of every read in flight, earned as it
			// starts and spent a delay later (see gateway.Config.Tied).
			burst = max(burst, float64(f.maxRequests))
		}
		cfg.Tied, cfg.TiedDelay = true, f.tiedDelay
		if f.tiedDelay <= 0 {
			cfg.TiedDelay = -1 // at once (zero would mean the default)
		}
	} else if given["tied-delay"] {
		return cfg, nil, errors.New("-tied-delay applies only with -tied")
	}
	budget, err := hedge.NewBudget(fraction, burst)
	if err != nil {
		return cfg, nil, fmt.Errorf("-hedge-fraction/-hedge-burst: %w", err)
	}
	if f.attempts < 1 || f.attempts > hedge.MaxAttemptsCap {
		return cfg, nil, fmt.Errorf("-attempts-per-request %d must be within [1, %d]", f.attempts, hedge.MaxAttemptsCap)
	}
	switch {
	case f.gateWindow <= 0:
		return cfg, nil, fmt.Errorf("-gate-window %v must be positive", f.gateWindow)
	case !(f.gateWinRate > 0 && f.gateWinRate <= 0.5):
		return cfg, nil, fmt.Errorf("-gate-min-win-rate %v must be within (0, 0.5]", f.gateWinRate)
	case !(f.gateSlowdown >= 1) || math.IsInf(f.gateSlowdown, 0):
		return cfg, nil, fmt.Errorf("-gate-slowdown %v must be a number of at least 1", f.gateSlowdown)
	}
	cfg.Policy = hedge.Policy{
		Delay:       fixed,
		Adaptive:    hedge.Adaptive{Quantile: q},
		MaxAttempts: f.attempts,
		Budget:      budget,
		Gate:        hedge.Gate{Disabled: !f.gate, Window: f.gateWindow, MinWinRate: f.gateWinRate, Slowdown: f.gateSlowdown},
	}
	switch {
	case f.maxRequests < 1:
		return cfg, nil, fmt.Errorf("-max-requests %d must be at least 1", f.maxRequests)
	case f.maxAttempts < 0:
		return cfg, nil, fmt.Errorf("-max-attempts %d must not be negative", f.maxAttempts)
	case f.timeout <= 0:
		return cfg, nil, fmt.Errorf("-timeout %v must be positive", f.timeout)
	case f.maxBody <= 0:
		return cfg, nil, fmt.Errorf("-max-response-bytes %d must be positive", f.maxBody)
	case f.maxRespHeader < gateway.MinResponseHeaderBytes || f.maxRespHeader > gateway.MaxResponseHeaderBytesLimit:
		return cfg, nil, fmt.Errorf("-max-response-header-bytes %d must be within [%d, %d]", f.maxRespHeader, gateway.MinResponseHeaderBytes, gateway.MaxResponseHeaderBytesLimit)
	case f.drain < 0:
		return cfg, nil, fmt.Errorf("-drain-timeout %v must not be negative", f.drain)
	case f.drainDelay < 0:
		return cfg, nil, fmt.Errorf("-drain-delay %v must not be negative", f.drainDelay)
	case f.maxHeaderBytes < 1<<10 || f.maxHeaderBytes > 1<<20:
		return cfg, nil, fmt.Errorf("-max-header-bytes %d must be within [1024, 1048576]", f.maxHeaderBytes)
	case f.maxConns < 1:
		return cfg, nil, fmt.Errorf("-max-conns %d must be at least 1", f.maxConns)
	case f.clientServer != gateway.PlainH1 && f.clientServer != gateway.PlainNetHTTP:
		return cfg, nil, fmt.Errorf("-client-server %q: want %q or %q", f.clientServer, gateway.PlainH1, gateway.PlainNetHTTP)
	case !(f.probFactor > 1) || math.IsInf(f.probFactor, 0):
		return cfg, nil, fmt.Errorf("-probation-factor %v must be a number above 1", f.probFactor)
	case f.probMinExcess < 0:
		return cfg, nil, fmt.Errorf("-probation-min-excess %v must not be negative", f.probMinExcess)
	case f.probWindow <= 0:
		return cfg, nil, fmt.Errorf("-probation-window %v must be positive", f.probWindow)
	case !(f.probMaxShare > 0 && f.probMaxShare <= 1):
		return cfg, nil, fmt.Errorf("-probation-max-share %v must be within (0, 1]", f.probMaxShare)
	case !(f.shadowRate > 0) || math.IsInf(f.shadowRate, 0):
		return cfg, nil, fmt.Errorf("-shadow-rate %v must be a positive number", f.shadowRate)
	}
	for _, a := range []struct{ name, addr string }{{"-listen", f.listen}, {"-admin", f.admin}} {
		if a.addr == "" && a.name == "-admin" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return cfg, nil, fmt.Errorf("%s %q: want host:port, such as 127.0.0.1:8080", a.name, a.addr)
		}
	}
	if f.admin != "" && f.admin == f.listen && !strings.HasSuffix(f.listen, ":0") {
		return cfg, nil, errors.New("-admin must differ from -listen: metrics belong on a separate listener")
	}
	cfg.MaxInFlightRequests = f.maxRequests
	cfg.MaxInFlightAttempts = f.maxAttempts
	cfg.Timeout = f.timeout
	cfg.MaxResponseBytes = f.maxBody
	cfg.MaxResponseHeaderBytes = f.maxRespHeader
	cfg.BackendProtocol = f.protocol
	cfg.DisableProbation = !f.probation
	cfg.TrustedHop = f.trustedHop
	cfg.Replica.Probation = replica.Probation{Factor: f.probFactor, MinExcess: f.probMinExcess, Window: f.probWindow, MaxShare: f.probMaxShare, ShadowRate: f.shadowRate}
	if f.probMinExcess == 0 {
		cfg.Replica.Probation.MinExcess = -1 // no floor (zero would mean the default)
	}
	w := &lockedWriter{w: stderr} // the log and the access log share it
	logger, err := newLogger(w, f.logFormat, f.logLevel)
	if err != nil {
		return cfg, nil, err
	}
	cfg.Logger = logger
	if cfg.AccessLog, cfg.AccessLogSample, err = f.accessLogger(w, given["access-log-sample"]); err != nil {
		return cfg, nil, err
	}
	if err := f.checkTrace(given["trace-sample"]); err != nil {
		return cfg, nil, err
	}
	if cfg.Affinity, err = f.affinity(given); err != nil {
		return cfg, nil, err
	}
	return cfg, logger, nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		opts.ReplaceAttr = secondsAttr
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want text or json", format)
}

// serve runs the client and admin listeners with f, without reloads, until
// ctx ends, then drains.
func serve(ctx context.Context, g *gateway.Gateway, f serveFlags, logger *slog.Logger) error {
	r := &reloader{g: g, log: logger}
	r.running.Store(&f)
	return serveReloading(ctx, g, r, nil)
}

// serveReloading runs the client and admin listeners until ctx ends,
// reloading the configuration on each SIGHUP (hup), then drains.
func serveReloading(ctx context.Context, g *gateway.Gateway, r *reloader, hup <-chan os.Signal) error {
	f, logger := r.current(), r.log
	if err := r.loadCerts(f); err != nil {
		return err
	}
	inner, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err // "listen tcp <addr>: ...": it names the address itself
	}
	ln := connlimit.New(inner, f.maxConns)
	trimCtx, stopTrim := context.WithCancel(ctx)
	trimmed := make(chan struct{})
	go func() { trimAfterWaves(trimCtx, ln, logger, trimPoll, trimMinDrop); close(trimmed) }()
	watched := func() {}
	defer func() { stopTrim(); <-trimmed; watched() }()
	// ConnState tells the limit which connections are idle.
	sc := gateway.ServerConfig{MaxHeaderBytes: f.maxHeaderBytes, ConnState: ln.ConnState, Plain: f.clientServer}
	var srv gateway.ClientServer
	errs := make(chan error, 2)
	if r.certs != nil {
		hs := g.Server(sc) // HTTP/2 by ALPN: net/http's
		srv = hs
		watched = r.serveClients(trimCtx, hs, ln, errs)
	} else {
		srv = g.PlainServer(sc)
		go func() { errs <- srv.Serve(ln) }()
	}
	servers := []gateway.ClientServer{srv}
	if f.tied {
		logger.Info("gateway listening", "addr", ln.Addr().String(), "tls", r.certs != nil, "server", serverName(r, f), "backends", f.backends, "mode", gateway.ModeTied, "tiedDelay", f.tiedDelay)
	} else {
		logger.Info("gateway listening", "addr", ln.Addr().String(), "tls", r.certs != nil, "server", serverName(r, f), "backends", f.backends, "mode", gateway.ModeHedge, "hedgeDelay", f.delay)
	}
	if f.admin != "" {
		aln, err := net.Listen("tcp", f.admin)
		if err != nil {
			srv.Close()
			<-errs
			return err
		}
		admin := &http.Server{Handler: adminHandler(g, processRegistry(connCollector{ln}), r), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second,
			DisableGeneralOptionsHandler: true, // OPTIONS * goes to the mux: no 200 on its own
			ErrorLog:                     slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		servers = append(servers, admin)
		go func() { errs <- admin.Serve(aln) }()
		logger.Info("admin listening", "addr", aln.Addr().String())
	}
	if r.disc != nil {
		dctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { r.runDiscovery(dctx); close(done) }()
		defer func() { stop(); <-done }()
	}
	for running := true; running; {
		select {
		case err := <-errs:
			for _, s := range servers {
				s.Close()
			}
			return err
		case <-hup:
			// Here, one at a time; reload logs what it did or why not.
			r.reload("SIGHUP")
		case <-ctx.Done():
			running = false
		}
	}
	return drain(g, r.current(), servers, errs, logger)
}

// serverName names the server of the client listener, for the log.
func serverName(r *reloader, f *serveFlags) string {
	if r.certs != nil {
		return gateway.PlainNetHTTP
	}
	return f.clientServer
}

// drain ends serving as load balancers expect: /readyz turns 503 at once,
// while requests are still served for -drain-delay, so that balancers see
// it and stop sending before the listener closes (Kubernetes removes a
// pod from its endpoints while it runs, not before; a preStop sleep or
// this delay covers the gap); every answer from then on closes its
// connection ("Connection: close", as Envoy's drain does), so that
// clients reconnect elsewhere. Then the servers shut down, waiting up to
// -drain-timeout for the requests in flight.
//
// The delay defaults to 0, as nginx, HAProxy and Traefik default their
// equivalents: a process that is not behind a balancer (a test, a
// developer's terminal) should not wait, and one that is knows its
// balancer's health-check interval.
func drain(g *gateway.Gateway, f *serveFlags, servers []gateway.ClientServer, errs <-chan error, logger *slog.Logger) error {
	g.StartDrain()
	servers[0].SetKeepAlivesEnabled(false)
	if f.drainDelay > 0 {
		logger.Info("draining: /readyz answers 503; the listener closes after the drain delay", "delay", f.drainDelay)
		time.Sleep(f.drainDelay)
	}
	logger.Info("draining", "timeout", f.drain)
	ctx, cancel := context.WithTimeout(context.Background(), f.drain)
	defer cancel()
	var drainErr error
	for _, s := range servers {
		if err := s.Shutdown(ctx); err != nil {
			drainErr = err
			s.Close()
		}
	}
	for range servers {
		<-errs // http.ErrServerClosed from each Serve
	}
	if drainErr != nil {
		logger.Warn("drain timed out; open connections closed", "err", drainErr)
	} else {
		logger.Info("drained; bye")
	}
	return nil
}
