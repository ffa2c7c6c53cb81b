package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
)

// A read gateway in front of two replicas of a service, one of which hangs.
// Whichever replica the gateway picks as the primary, the client gets the
// healthy replica's answer: if the hanging one was picked, a hedge goes to
// the other after 20ms, wins, and the hanging request is cancelled.
func Example() {
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // stuck until the gateway gives up on it
	}))
	defer hanging.Close()
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "item %s", r.URL.Query().Get("id"))
	}))
	defer healthy.Close()

	g, err := gateway.New(gateway.Config{
		Backends: []string{hanging.URL, healthy.URL},
		Policy:   hedge.Policy{Delay: 20 * time.Millisecond}, // zero means adaptive: p95 of recent latencies
		Timeout:  2 * time.Second,                            // for the whole read, hedges included
	})
	if err != nil {
		panic(err)
	}
	defer g.Close() // after the server: cancels shadow requests, frees idle backend connections

	// A Gateway is an http.Handler: serve it as any other. In production,
	// http.Server{Handler: g}, and g.Admin() on a separate listener.
	front := httptest.NewServer(g)
	defer front.Close()

	resp, err := http.Get(front.URL + "/item?id=7")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))

	// Only reads are proxied: anything else is refused before any replica
	// sees it.
	resp, err = http.Post(front.URL+"/item", "text/plain", nil)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Allow"))
	// Output:
	// 200 item 7
	// 405 GET, HEAD
}
