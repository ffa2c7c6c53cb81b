// Command proxies runs the Go programs bench/gateway.sh compares the
// gateway with: a trivial backend, and a plain httputil.ReverseProxy in
// front of it; and, for profiles, the gateway itself in-process with a CPU
// profile of a given stretch of its life. All bind loopback only.
//
//	proxies backend -listen 127.0.0.1:18081
//	proxies reverseproxy -listen 127.0.0.1:18082 -backend http://127.0.0.1:18081
//	proxies gateway -listen 127.0.0.1:18085 -backend http://127.0.0.1:18081 \
//	        -cpuprofile gw.pprof -profile-after 2s -profile-for 10s
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
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime/pprof"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/internal/h1server"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: proxies backend|reverseproxy|gateway [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on")
	backend := fs.String("backend", "", "backend base URL (reverseproxy, gateway)")
	cpuprofile := fs.String("cpuprofile", "", "gateway: write a CPU profile here")
	after := fs.Duration("profile-after", 2*time.Second, "gateway: start the profile this long after listening")
	span := fs.Duration("profile-for", 10*time.Second, "gateway: profile this long")
	clientServer := fs.String("client-server", "h1", "gateway: the server of its clients, h1 or net/http (as tailgate serve's flag)")
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
		backendURL(*backend)
		g, err := gateway.New(gateway.Config{Backends: []string{*backend}, MaxInFlightRequests: 1024, MaxInFlightAttempts: 2048})
		if err != nil {
			log.Fatal(err)
		}
		if *cpuprofile != "" {
			go profile(*cpuprofile, *after, *span)
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			log.Fatal(err)
		}
		srv := g.Server(gateway.ServerConfig{}) // as tailgate serve serves plain-HTTP clients
		if *clientServer == "h1" {
			log.Fatal(h1server.Like(srv, g).Serve(ln))
		}
		log.Fatal(srv.Serve(ln))
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
