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
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/connlimit"
	"github.com/tailgate-dev/tailgate/internal/discovery"
	"github.com/tailgate-dev/tailgate/internal/h1server"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
)

const serveSynopsis = `Runs the read gateway: a reverse proxy for GET and HEAD that sends each
request to a primary replica chosen by latency and, when the answer is late,
a hedge to a different replica, keeping the first acceptable answer. Routes
in the -config file may declare other methods reads (a search POST, its body
buffered and sent to each attempt) and gRPC methods (over h2c or TLS). With
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
	maxReqBody     int64
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
	// fromFile is where the -config file set each flag it set ("path:line"),
	// for errors about their values (see locate).
	fromFile map[string]string
	// routes are the file's routes, and routeLines where each begins, by
	// name (see parseRoutes).
	routes     []gateway.Route
	routeLines map[string]string
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// From here on SIGHUP reloads the configuration (see serveReloading)
	// rather than ending the process, as it would by default; one that
	// comes before the serve loop runs waits in the channel.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return serveWith(ctx, args, stdout, stderr, hup)
}

// serveWith is runServe with hup as its SIGHUP channel (a test's own).
func serveWith(ctx context.Context, args []string, stdout, stderr io.Writer, hup chan os.Signal) int {
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
	r := &reloader{args: args, log: logger, disc: w}
	r.running.Store(f)
	if err := r.loadCerts(f); err != nil {
		return usageError(stderr, "serve", err)
	}
	g, cfg, err := newGateway(ctx, w, cfg)
	if errors.Is(err, discovery.ErrNoBackends) {
		// DNS's answer, not the command line's: wait for records, on
		// the listeners, saying why (servewait.go).
		logger.Warn("no replica at start", "err", err)
		g, cfg, err = r.awaitBackends(ctx, cfg, hup)
		if err != nil {
			logger.Error("serve failed", "err", err)
			return exitError
		}
		if g == nil {
			return exitOK // stopped while waiting
		}
		reportDiscovery(g, w)
		f = r.current() // a SIGHUP may have replaced it
	} else if err != nil {
		return usageError(stderr, "serve", f.locate(err))
	}
	defer g.Close()
	r.g = g
	warnSameServer(ctx, logger, cfg.Backends, nil)
	f.warnBackendTLSUnused(logger, cfg.Backends)
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
	fs.Int64Var(&f.maxReqBody, "max-request-body-bytes", gateway.DefaultMaxRequestBodyBytes, "largest body of a read whose route declares its method (a search POST, a gRPC call), read whole before the first attempt and sent to each; larger: 413 (gRPC: RESOURCE_EXHAUSTED), nothing forwarded")
	fs.Int64Var(&f.maxRespHeader, "max-response-header-bytes", gateway.DefaultMaxResponseHeaderBytes, fmt.Sprintf("largest backend response header block read; larger: the attempt fails (502 if none succeeds), within [%d, %d]", gateway.MinResponseHeaderBytes, gateway.MaxResponseHeaderBytesLimit))
	fs.BoolVar(&f.gate, "gate", true, "overload gate: pause hedges for late answers on evidence of overload (false turns it off; the budget still bounds hedges)")
	fs.DurationVar(&f.gateWindow, "gate-window", hedge.DefaultGateWindow, "overload gate: how far back hedge outcomes count; it reopens within one window of the overload ending")
	fs.Float64Var(&f.gateWinRate, "gate-min-win-rate", hedge.DefaultGateMinWinRate, "overload gate: shut when fewer hedges than this share win (the alternates are as slow), in (0, 0.5]")
	fs.Float64Var(&f.gateSlowdown, "gate-slowdown", hedge.DefaultGateSlowdown, "overload gate: shut when the median latency reaches this many times its baseline and hedges do not clearly win (>= 1)")
	fs.StringVar(&f.protocol, "backend-protocol", gateway.ProtocolHTTP1, `protocol to http:// replicas: "http1" or "h2c" (https:// replicas negotiate HTTP/2 or HTTP/1.1 by ALPN)`)
	fs.DurationVar(&f.drain, "drain-timeout", 15*time.Second, "on SIGINT/SIGTERM, how long requests in flight may take to finish")
	fs.IntVar(&f.maxHeaderBytes, "max-header-bytes", gateway.DefaultMaxHeaderBytes, "largest request line and header block accepted from clients; larger: 431")
	fs.StringVar(&f.clientServer, "client-server", plainH1, `the server of plain-HTTP clients: "h1" (the gateway's own, internal/h1server) or "net/http" (Go's, as before: a fallback); clients over TLS are served by net/http either way; needs a restart to change`)
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

// config turns the flags into a gateway configuration and a logger. Its
// error holds every problem found, not the first alone (errors.Join, a
// line each), each located in the file when the file set the flag (see
// locate): an operator fixes them in one go, and a reload that refuses a
// file says all it would refuse at start.
func (f serveFlags) config(stderr io.Writer) (gateway.Config, *slog.Logger, error) {
	var cfg gateway.Config
	c := &checks{f: &f}
	if strings.TrimSpace(f.backends) == "" {
		c.add(errors.New("-backends is required: comma-separated replica URLs such as http://127.0.0.1:8081,http://127.0.0.1:8082"))
	} else {
		for _, b := range strings.Split(f.backends, ",") {
			cfg.Backends = append(cfg.Backends, strings.TrimSpace(b))
		}
		c.add(f.checkDNS(cfg.Backends))
	}
	c.add(f.checkTLS())
	backendTLS, err := f.backendTLS()
	c.add(err)
	cfg.BackendTLS = backendTLS
	fixed, q, err := hedge.ParseDelay(f.delay)
	if err != nil {
		c.add(fmt.Errorf("-hedge-delay: %w", err))
	}
	given := map[string]bool{}
	if f.fs != nil {
		f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = !f.kept[fl.Name] })
	}
	fraction, burst := f.fraction, f.burst
	if f.tied {
		switch {
		case given["hedge-delay"]:
			c.add(errors.New("-hedge-delay does not apply with -tied: the second copy goes after -tied-delay"))
		case given["gate"] || given["gate-window"] || given["gate-min-win-rate"] || given["gate-slowdown"]:
			c.add(errors.New("the -gate flags do not apply with -tied: the overload gate is off, since every read wants its second copy"))
		case f.attempts != 2:
			c.add(fmt.Errorf("-attempts-per-request %d does not apply with -tied: a tied request is two copies", f.attempts))
		case f.tiedDelay >= f.timeout:
			c.add(fmt.Errorf("-tied-delay %v must be shorter than -timeout %v", f.tiedDelay, f.timeout))
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
		c.add(errors.New("-tied-delay applies only with -tied"))
	}
	// The budget's rates, each by its flag (hedge.NewBudget checks them
	// together, and its error would name neither).
	c.check(fraction >= 0 && fraction <= 1, "-hedge-fraction %v must be within [0, 1]", fraction)
	c.check(burst >= 1 && burst <= 1e9, "-hedge-burst %v must be within [1, 1e9]", burst)
	budget, err := hedge.NewBudget(fraction, burst)
	if err != nil && c.ok() {
		c.add(fmt.Errorf("-hedge-fraction/-hedge-burst: %w", err)) // unreachable: checked above
	}
	c.check(f.attempts >= 1 && f.attempts <= hedge.MaxAttemptsCap, "-attempts-per-request %d must be within [1, %d]", f.attempts, hedge.MaxAttemptsCap)
	c.check(f.gateWindow > 0, "-gate-window %v must be positive", f.gateWindow)
	c.check(f.gateWinRate > 0 && f.gateWinRate <= 0.5, "-gate-min-win-rate %v must be within (0, 0.5]", f.gateWinRate)
	c.check(f.gateSlowdown >= 1 && !math.IsInf(f.gateSlowdown, 0), "-gate-slowdown %v must be a number of at least 1", f.gateSlowdown)
	cfg.Policy = hedge.Policy{
		Delay:       fixed,
		Adaptive:    hedge.Adaptive{Quantile: q},
		MaxAttempts: f.attempts,
		Budget:      budget,
		Gate:        hedge.Gate{Disabled: !f.gate, Window: f.gateWindow, MinWinRate: f.gateWinRate, Slowdown: f.gateSlowdown},
	}
	c.check(f.maxRequests >= 1, "-max-requests %d must be at least 1", f.maxRequests)
	c.check(f.maxAttempts >= 0, "-max-attempts %d must not be negative", f.maxAttempts)
	c.check(f.timeout > 0, "-timeout %v must be positive", f.timeout)
	c.check(f.maxBody > 0, "-max-response-bytes %d must be positive", f.maxBody)
	c.check(f.maxReqBody > 0, "-max-request-body-bytes %d must be positive", f.maxReqBody)
	c.check(f.maxRespHeader >= gateway.MinResponseHeaderBytes && f.maxRespHeader <= gateway.MaxResponseHeaderBytesLimit,
		"-max-response-header-bytes %d must be within [%d, %d]", f.maxRespHeader, gateway.MinResponseHeaderBytes, gateway.MaxResponseHeaderBytesLimit)
	c.check(f.drain >= 0, "-drain-timeout %v must not be negative", f.drain)
	c.check(f.drainDelay >= 0, "-drain-delay %v must not be negative", f.drainDelay)
	c.check(f.maxHeaderBytes >= 1<<10 && f.maxHeaderBytes <= 1<<20, "-max-header-bytes %d must be within [1024, 1048576]", f.maxHeaderBytes)
	c.check(f.maxConns >= 1, "-max-conns %d must be at least 1", f.maxConns)
	c.check(f.clientServer == plainH1 || f.clientServer == plainNetHTTP,
		"-client-server %q: want %q or %q", f.clientServer, plainH1, plainNetHTTP)
	c.check(f.probFactor > 1 && !math.IsInf(f.probFactor, 0), "-probation-factor %v must be a number above 1", f.probFactor)
	c.check(f.probMinExcess >= 0, "-probation-min-excess %v must not be negative", f.probMinExcess)
	c.check(f.probWindow > 0, "-probation-window %v must be positive", f.probWindow)
	c.check(f.probMaxShare > 0 && f.probMaxShare <= 1, "-probation-max-share %v must be within (0, 1]", f.probMaxShare)
	c.check(f.shadowRate > 0 && !math.IsInf(f.shadowRate, 0), "-shadow-rate %v must be a positive number", f.shadowRate)
	c.add(checkAddr("-listen", f.listen))
	if f.admin != "" {
		c.add(checkAddr("-admin", f.admin))
	}
	if f.admin != "" && f.admin == f.listen && !strings.HasSuffix(f.listen, ":0") {
		c.add(errors.New("-admin must differ from -listen: metrics belong on a separate listener"))
	}
	cfg.MaxInFlightRequests = f.maxRequests
	cfg.MaxInFlightAttempts = f.maxAttempts
	cfg.Timeout = f.timeout
	cfg.MaxResponseBytes = f.maxBody
	cfg.MaxRequestBodyBytes = f.maxReqBody
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
	c.add(err)
	cfg.Logger = logger
	cfg.AccessLog, cfg.AccessLogSample, err = f.accessLogger(w, given["access-log-sample"])
	c.add(err)
	c.add(f.checkTrace(given["trace-sample"]))
	cfg.Affinity, err = f.affinity(given)
	c.add(err)
	cfg.Routes = f.routes
	if !c.ok() {
		return cfg, nil, c.err()
	}
	return cfg, logger, nil
}

// checkAddr checks a listener's address as net.Listen will take it:
// host:port with a port number in [0, 65535] (or a service name).
func checkAddr(name, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return fmt.Errorf("%s %q: want host:port with a port within [0, 65535], such as 127.0.0.1:8080", name, addr)
	}
	return nil
}

// checks collects a configuration's problems.
type checks struct {
	f    *serveFlags
	errs []error
}

// add records err, if any, located (see serveFlags.locate).
func (c *checks) add(err error) {
	if err != nil {
		c.errs = append(c.errs, c.f.locate(err))
	}
}

// check records the problem format describes unless ok.
func (c *checks) check(ok bool, format string, args ...any) {
	if !ok {
		c.add(fmt.Errorf(format, args...))
	}
}

func (c *checks) ok() bool   { return len(c.errs) == 0 }
func (c *checks) err() error { return errors.Join(c.errs...) }

// flagNamed matches the flag an error starts with: "-hedge-fraction 1.5
// must be ...", "-backends: ...".
var flagNamed = regexp.MustCompile(`^-([a-z0-9][a-z0-9-]*)`)

// locate prefixes err with the file and line of the flag it starts with,
// when the -config file set that flag (the command line did not), as the
// file's own errors are: "tailgate.yaml:7: -hedge-fraction 1.5 must be
// within [0, 1]". Any check, including one added later, is located
// without a line of code of its own, as long as its error starts with
// the flag's name, as they all do.
func (f *serveFlags) locate(err error) error {
	if m := routeNamed.FindStringSubmatch(err.Error()); m != nil {
		if at, ok := f.routeLines[m[1]]; ok {
			return fmt.Errorf("%s: %w", at, err)
		}
	}
	m := flagNamed.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	if at, ok := f.fromFile[m[1]]; ok {
		return fmt.Errorf("%s: %w", at, err)
	}
	return err
}

// routeNamed matches the route a gateway error is about: "gateway:
// invalid configuration: route search: ...".
var routeNamed = regexp.MustCompile(`\broute ([A-Za-z0-9._-]+):`)

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
	inner, err := listen(&r.pre.client, f.listen)
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
	// gRPC clients on an insecure channel speak h2c: net/http's server
	// then serves the listener, HTTP/1.1 and h2c told apart by the
	// HTTP/2 preface (h1server speaks HTTP/1.1 only).
	sc := gateway.ServerConfig{MaxHeaderBytes: f.maxHeaderBytes, ConnState: ln.ConnState, H2C: grpcRoutes(f.routes)}
	hs := g.Server(sc)
	var srv clientServer = hs
	errs := make(chan error, 2)
	switch {
	case r.certs != nil: // HTTP/2 by ALPN: net/http's
		watched = r.serveClients(trimCtx, hs, ln, errs)
	case f.clientServer == plainH1 && !sc.H2C:
		srv = h1server.Like(hs, g) // the same settings, on the faster server
		fallthrough
	default:
		go func() { errs <- srv.Serve(ln) }()
	}
	servers := []clientServer{srv}
	if f.tied {
		logger.Info("gateway listening", "addr", ln.Addr().String(), "tls", r.certs != nil, "server", serverName(r, f), "backends", f.backends, "mode", gateway.ModeTied, "tiedDelay", f.tiedDelay)
	} else {
		logger.Info("gateway listening", "addr", ln.Addr().String(), "tls", r.certs != nil, "server", serverName(r, f), "backends", f.backends, "mode", gateway.ModeHedge, "hedgeDelay", f.delay)
	}
	if f.admin != "" {
		aln, err := listen(&r.pre.admin, f.admin)
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

// The servers of plain-HTTP/1.1 clients (-client-server).
const (
	plainH1      = "h1"       // internal/h1server: the handler in the connection's goroutine (docs/performance.md)
	plainNetHTTP = "net/http" // net/http's server, as the gateway's Server returns it
)

// clientServer is what serves the gateway to clients: net/http's
// *http.Server or internal/h1server's.
type clientServer interface {
	Serve(net.Listener) error
	// Shutdown stops accepting, closes idle connections and waits for
	// requests in flight, or for ctx to end.
	Shutdown(context.Context) error
	Close() error
	// SetKeepAlivesEnabled(false) closes each connection after its
	// current request (a drain).
	SetKeepAlivesEnabled(bool)
}

// serverName names the server of the client listener, for the log.
func serverName(r *reloader, f *serveFlags) string {
	switch {
	case r.certs != nil:
		return plainNetHTTP
	case grpcRoutes(f.routes):
		return plainNetHTTP + " (h2c for gRPC)"
	}
	return f.clientServer
}

// grpcRoutes reports whether a route is a gRPC route.
func grpcRoutes(routes []gateway.Route) bool {
	for _, r := range routes {
		if len(r.GRPC) > 0 {
			return true
		}
	}
	return false
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
func drain(g *gateway.Gateway, f *serveFlags, servers []clientServer, errs <-chan error, logger *slog.Logger) error {
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
