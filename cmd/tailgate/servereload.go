package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/internal/discovery"
)

// This file: reloading serve's configuration without a restart, on SIGHUP
// or POST /-/reload: the file is read again, the command line applied over
// it again, and what may change on a running gateway is applied
// (gateway.Reload); what may not is reported and left as it runs.

// liveFlags are the flags whose change a reload applies. A flag not named
// here needs a restart: a reload that changes it logs so and keeps its
// running value. That is the safe default for a flag added later; add its
// name here once what it sets can change on a running gateway (in
// gateway.Reload, or read from reloader.current when used).
var liveFlags = map[string]bool{
	"backends": true,
	// The hedging policy and its budget (hedge.Hedger.Update,
	// hedge.Budget.SetRates), the overload gate.
	"hedge-delay": true, "hedge-fraction": true, "hedge-burst": true, "attempts-per-request": true,
	"gate": true, "gate-window": true, "gate-min-win-rate": true, "gate-slowdown": true,
	"tied-delay": true,
	// Limits, per request.
	"max-requests": true, "max-attempts": true, "timeout": true, "max-response-bytes": true, "trusted-hop": true,
	// Probation (replica.Set.Next).
	"probation": true, "probation-factor": true, "probation-min-excess": true, "probation-window": true,
	"probation-max-share": true, "shadow-rate": true,
	// Affinity mode's key (gateway.Reload refuses turning the mode on or
	// off; the partition knobs are not live: the table is built once).
	"affinity-key": true,
	// Read by serve when used.
	"drain-timeout": true, "drain-delay": true, "enable-reload-endpoint": true,
	// Backend TLS: its files are read again on every reload, whether their
	// names change or not, and a new tls.Config goes to gateway.Reload,
	// for new connections.
	"backend-ca": true, "backend-cert": true, "backend-key": true, "backend-server-name": true,
	// Not live, deliberately: the log's settings (-log-format, -log-level,
	// -access-log, -access-log-sample). The loggers are built once, at
	// start, and share one writer; the gateway keeps those New was given
	// (gateway.Reload does not use cfg's Logger, AccessLog or
	// AccessLogSample). Nor the listeners, -tied, -backend-protocol,
	// -max-response-header-bytes and the connection limits; nor the names
	// of -tls-cert and -tls-key (whose files are read again on each
	// reload, as they change: see reloader.reload).
}

// errBadConfig marks a reload refused for its configuration (the file, a
// value, a check), as against a failure of the gateway's.
var errBadConfig = errors.New("configuration refused")

// reloader holds serve's configuration in force and replaces it.
type reloader struct {
	args []string // the command line, applied over the file each time
	g    *gateway.Gateway
	log  *slog.Logger
	// disc resolves the DNS entries of -backends (servediscovery.go);
	// nil: the backends are taken as they are.
	disc *discovery.Watcher

	mu      sync.Mutex // serialises reloads
	running atomic.Pointer[serveFlags]

	// certs is the client listener's certificate, with -tls-cert; set
	// before serving starts (loadCerts), for the process's life.
	certs *gateway.CertFiles
	// pre are listeners bound while serve waited for its first replica
	// (servewait.go), for serveReloading to serve.
	pre bound
}

// current returns the flags in force. They are not to be changed: a reload
// replaces them whole.
func (r *reloader) current() *serveFlags { return r.running.Load() }

// loadServeFlags parses args into serve's flags, with those the -config
// file sets and args do not. A code >= 0 is the exit code after -h or a
// wrong command line, which parseFlags has reported on stdout or stderr;
// an error is the file's.
func loadServeFlags(args []string, stdout, stderr io.Writer) (*serveFlags, int, error) {
	fs := newFlags("serve", serveSynopsis, stderr)
	f := &serveFlags{}
	f.register(fs)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return nil, code, nil
	}
	if f.configFile != "" {
		fc, err := applyConfigFile(fs, f.configFile)
		if err != nil {
			return nil, -1, err
		}
		f.fromFile, f.routes, f.routeLines = fc.lines, fc.routes, fc.routeLines
	}
	return f, -1, nil
}

// given reports whether flag name was set, by the command line or the
// file, and not by a reload keeping its running default (see kept).
func (f *serveFlags) given(name string) bool {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set && !f.kept[name]
}

// reload reads the configuration again and applies it, logging what it
// did; trigger says what asked (SIGHUP, the admin endpoint). A
// configuration that fails to load or validate is logged and refused (the
// error wraps errBadConfig), and the running one kept.
func (r *reloader) reload(trigger string) error {
	_, err := r.reloadReport(trigger)
	return err
}

// reloadReport is reload, also returning a line for each changed setting
// that waits for a restart (its running value kept), for the answer of
// POST /-/reload.
func (r *reloader) reloadReport(trigger string) (restart []string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.certs != nil {
		// Whatever becomes of the configuration: a reload is also how an
		// operator says "the certificate has changed". CertFiles logs
		// what it did, and keeps the running one if the new does not load.
		r.certs.Reload()
	}
	restart, err = r.apply(trigger)
	if err != nil {
		r.log.Error("reload failed; the running configuration is kept", "trigger", trigger, "err", err)
	}
	return restart, err
}

// prepared is a configuration read again and checked, ready to apply.
type prepared struct {
	next *serveFlags
	cfg  gateway.Config // with next's DNS entries unresolved
	// changed names the flags whose change applies live; restart, those
	// whose change waits for a restart, set back to their running values
	// in next.
	changed []string
	restart []pendingFlag
}

// pendingFlag is a setting whose change needs a restart.
type pendingFlag struct{ name, running, next string }

func (p pendingFlag) String() string {
	return fmt.Sprintf("-%s: running %q, configured %q", p.name, p.running, p.next)
}

// prepare reads the configuration again (the file, the command line over
// it) and checks it whole, as a start would: one that would not start is
// refused (wrapping errBadConfig), even where the settings at fault need a
// restart, since the next start would fail on them. Of one that would,
// the settings that need a restart keep their running values.
func (r *reloader) prepare() (prepared, error) {
	var p prepared
	old := r.current()
	next, code, err := loadServeFlags(r.args, io.Discard, io.Discard)
	if code >= 0 {
		err = errors.New("the command line is refused") // unreachable: it was accepted at start
	}
	if err != nil {
		return p, fmt.Errorf("%w: %w", errBadConfig, err)
	}
	if _, _, err := next.config(io.Discard); err != nil {
		return p, fmt.Errorf("%w: %w", errBadConfig, err)
	}
	old.fs.VisitAll(func(fl *flag.Flag) {
		nf := next.fs.Lookup(fl.Name)
		if nf == nil || nf.Value.String() == fl.Value.String() {
			return
		}
		if liveFlags[fl.Name] {
			p.changed = append(p.changed, fl.Name)
			return
		}
		p.restart = append(p.restart, pendingFlag{fl.Name, fl.Value.String(), nf.Value.String()})
		// Back to the running value, as the command line would set it:
		// every flag's String is what its Set takes. Set counts it as
		// given, which a default was not (-access-log-sample is refused
		// when given with -access-log off): kept says so.
		if err := next.fs.Set(fl.Name, fl.Value.String()); err != nil {
			r.log.Warn("could not keep the running value", "flag", fl.Name, "err", err)
		}
		if !old.given(fl.Name) {
			if next.kept == nil {
				next.kept = map[string]bool{}
			}
			next.kept[fl.Name] = true
		}
	})
	if !reflect.DeepEqual(old.routes, next.routes) {
		p.changed = append(p.changed, "routes") // applied live, whole or not at all
	}
	cfg, _, err := next.config(io.Discard) // the gateway keeps the logger it has
	if err != nil {
		// The running values of some settings with the new ones of
		// others (-tied kept, -hedge-delay new): refused as a whole.
		return p, fmt.Errorf("%w: %w", errBadConfig, err)
	}
	p.next, p.cfg = next, cfg
	return p, nil
}

func (r *reloader) apply(trigger string) ([]string, error) {
	p, err := r.prepare()
	if err != nil {
		return nil, err
	}
	res, err := r.reloadBackends(p.cfg)
	if errors.Is(err, gateway.ErrInvalid) {
		return nil, fmt.Errorf("%w: %w", errBadConfig, p.next.locate(err))
	}
	if err != nil {
		return nil, err
	}
	r.running.Store(p.next)
	restart := r.logRestart(trigger, p.restart)
	if len(p.changed) == 0 && len(res.Added)+len(res.Removed) == 0 {
		r.log.Info("configuration reloaded: nothing changed", "trigger", trigger, "file", p.next.configFile)
		return restart, nil
	}
	attrs := []any{"trigger", trigger, "file", p.next.configFile, "changed", strings.Join(p.changed, ",")}
	if len(res.Added) > 0 {
		attrs = append(attrs, "added", strings.Join(res.Added, ","))
	}
	if len(res.Removed) > 0 {
		attrs = append(attrs, "removed", strings.Join(res.Removed, ","))
	}
	r.log.Info("configuration reloaded", attrs...)
	if len(res.Added) > 0 {
		// As at start, for the pairs an added backend makes.
		warnSameServer(context.Background(), r.log, p.cfg.Backends, res.Added)
	}
	return restart, nil
}

// logRestart logs each setting whose change waits for a restart, and
// returns them as lines.
func (r *reloader) logRestart(trigger string, pending []pendingFlag) []string {
	var lines []string
	for _, p := range pending {
		r.log.Warn("this setting needs a restart to change; its running value is kept", "trigger", trigger,
			"flag", p.name, "running", p.running, "new", p.next)
		lines = append(lines, p.String())
	}
	return lines
}

// reloadHandler serves POST /-/reload, as Prometheus does: off unless
// -enable-reload-endpoint (403 then, saying so), 405 for other methods,
// 200 once reloaded (with the changes that wait for a restart, if any),
// 400 with the reasons for a configuration refused, 500 for another
// failure.
func reloadHandler(r *reloader) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed: POST to reload", http.StatusMethodNotAllowed)
			return
		}
		if r == nil || !r.current().enableReload {
			http.Error(w, "the reload endpoint is off: turn it on with -enable-reload-endpoint (or send SIGHUP)", http.StatusForbidden)
			return
		}
		restart, err := r.reloadReport("POST /-/reload")
		if err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, errBadConfig) {
				code = http.StatusBadRequest
			}
			http.Error(w, err.Error(), code)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "reloaded\n")
		if len(restart) > 0 {
			// Said in the answer, not only in the log: whoever reloads
			// learns that these changes are not in force yet.
			io.WriteString(w, "these changes need a restart (their running values are kept):\n")
			for _, l := range restart {
				io.WriteString(w, "  "+l+"\n")
			}
		}
	})
}
