package tied_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tailgate-dev/tailgate/tied"
)

// Two replicas on 127.0.0.1, each behind tied middleware that names the
// other as its peer. Replica a's only worker is busy, so the copy the
// client sends it waits in a's queue; the copy sent to b a millisecond
// later starts at once, and b tells a to drop its copy. The work runs once.
func dropped(s tied.Stats) uint64 { return s.DroppedByTwin + s.DroppedOnArrival }

func Example() {
	// Listeners first: each server's config names the other's address.
	a, b := httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	urlA, urlB := "http://"+a.Listener.Addr().String(), "http://"+b.Listener.Addr().String()
	srvA, err := tied.NewServer(tied.ServerConfig{Workers: 1, Peers: []string{urlB}})
	if err != nil {
		panic(err)
	}
	srvB, err := tied.NewServer(tied.ServerConfig{Workers: 1, Peers: []string{urlA}})
	if err != nil {
		panic(err)
	}
	release := make(chan struct{})
	a.Config.Handler = srvA.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			<-release
		}
		io.WriteString(w, "answer from a")
	}))
	b.Config.Handler = srvB.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// So that the output does not depend on timing: answer once a has
		// dropped its copy (otherwise the client, once it has this answer,
		// might cancel a's copy first).
		for dropped(srvA.Stats()) == 0 {
			time.Sleep(time.Millisecond)
		}
		io.WriteString(w, "answer from b")
	}))
	a.Start()
	b.Start()
	defer srvA.Close()
	defer srvB.Close()
	defer a.Close()
	defer b.Close()

	// Keep a's worker busy.
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		if resp, err := http.Get(urlA + "/busy"); err == nil {
			resp.Body.Close()
		}
	}()
	for srvA.Stats().Running == 0 {
		time.Sleep(time.Millisecond)
	}

	tr, err := tied.NewTransport(tied.TransportConfig{Targets: []string{urlA, urlB}})
	if err != nil {
		panic(err)
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := client.Get("http://replicas/item/42") // the host is replaced by the targets'
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))

	srvB.Shutdown(context.Background()) // waits for b's cancel message to be answered
	sa, sb := srvA.Stats(), srvB.Stats()
	// a's copy was dropped from its queue, or, if b's cancel overtook it
	// on the way to a, as it arrived.
	fmt.Printf("a: dropped its copy %d, ran %d request(s)\n", dropped(sa), sa.Dequeued)
	fmt.Printf("b: ran %d, cancels sent %d\n", sb.Dequeued, sb.CancelsSent)
	close(release)
	<-busy
	http.DefaultClient.CloseIdleConnections()
	// Output:
	// 200 answer from b
	// a: dropped its copy 1, ran 1 request(s)
	// b: ran 1, cancels sent 1
}
