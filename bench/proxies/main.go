// Command proxies runs the two Go programs bench/gateway.sh compares the
// gateway with: a trivial backend, and a plain httputil.ReverseProxy in
// front of it. Both bind loopback only.
//
//	proxies backend -listen 127.0.0.1:18081
//	proxies reverseproxy -listen 127.0.0.1:18082 -backend http://127.0.0.1:18081
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: proxies backend|reverseproxy [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on")
	backend := fs.String("backend", "", "backend base URL (reverseproxy)")
	fs.Parse(os.Args[2:])
	if host, _, err := net.SplitHostPort(*listen); err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("-listen %q: want a loopback address", *listen)
	}
	var h http.Handler
	switch os.Args[1] {
	case "backend":
		body := []byte(`{"value":"0123456789abcdef"}` + "\n")
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		})
	case "reverseproxy":
		u, err := url.Parse(*backend)
		if err != nil || u.Host == "" {
			log.Fatalf("-backend %q: want a URL", *backend)
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256 // as the gateway's pool: a fair comparison
		h = &httputil.ReverseProxy{
			Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(u); r.SetXForwarded() },
			Transport: t,
		}
	default:
		log.Fatalf("unknown mode %q", os.Args[1])
	}
	srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
