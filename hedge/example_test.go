package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// A lookup against two replicas, the first of which straggles: the hedge
// sent to the second after 10ms wins, and the receipt says so.
func Example() {
	h, err := hedge.New(hedge.Policy{Delay: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	receipts := make(chan hedge.Receipt, 1)
	v, err := hedge.Do(context.Background(), h, hedge.Op[string]{
		Targets: []string{"replica-a", "replica-b"},
		Call: func(ctx context.Context, a hedge.Attempt) (string, error) {
			if a.Target == 0 {
				// replica-a straggles. Every Call must honour ctx: when the
				// hedge wins, ctx is cancelled and this attempt stops.
				<-ctx.Done()
				return "", ctx.Err()
			}
			return fmt.Sprintf("answer from target %d (hedge: %v)", a.Target, a.IsHedge()), nil
		},
		// The receipt comes once the loser's fate is known, possibly after
		// Do has returned.
		OnReceipt: func(r hedge.Receipt) { receipts <- r },
	})
	fmt.Println(v, err)
	r := <-receipts
	fmt.Printf("winner %s, %d attempts, %d loser cancelled and seen to stop\n",
		r.WinnerTargetName, r.AttemptsLaunched, r.CancellationsObserved)
	// Output:
	// answer from target 1 (hedge: true) <nil>
	// winner replica-b, 2 attempts, 1 loser cancelled and seen to stop
}

// An error does not wait for the hedge delay: the next attempt goes to the
// other target at once (trigger "failure"), budget permitting. Accept
// decides what counts as an answer; here an empty result does not.
func ExampleDo() {
	h, err := hedge.New(hedge.Policy{Delay: time.Minute}) // a delay that never comes into play
	if err != nil {
		panic(err)
	}
	receipts := make(chan hedge.Receipt, 1)
	v, err := hedge.Do(context.Background(), h, hedge.Op[string]{
		Targets: []string{"east", "west"},
		Call: func(ctx context.Context, a hedge.Attempt) (string, error) {
			if a.Target == 0 {
				return "", errors.New("east: connection reset")
			}
			return "42", nil
		},
		Accept: func(v string, err error) error {
			if err == nil && v == "" {
				return errors.New("empty answer")
			}
			return err
		},
		OnReceipt: func(r hedge.Receipt) { receipts <- r },
	})
	fmt.Println(v, err)
	for _, a := range (<-receipts).Attempts {
		fmt.Printf("%s: %s, %s %s\n", a.TargetName, a.Trigger, a.Fate, a.Error)
	}
	// Output:
	// 42 <nil>
	// east: primary, failed east: connection reset
	// west: failure, won
}

// A Transport hedges reads over replica base URLs. One replica here hangs
// until its request is cancelled: if the primary goes there, after the
// 20ms delay a hedge, marked with the Tailgate-Hedge header, goes to the
// other replica and wins, and the primary's request is cancelled. Either
// way the fast replica answers.
func ExampleTransport() {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // a straggler: answers only when the client gives up
	}))
	defer slow.Close()
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "item %s", r.URL.Query().Get("id"))
	}))
	defer fast.Close()

	receipts := make(chan hedge.Receipt, 1)
	t, err := hedge.NewTransport(hedge.TransportConfig{
		Policy:  hedge.Policy{Delay: 20 * time.Millisecond},
		Targets: []string{slow.URL, fast.URL},
		OnReceipt: func(_ *http.Request, r hedge.Receipt) {
			receipts <- r
		},
	})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: t}

	// The request's own host is replaced by each attempt's target.
	resp, err := client.Get("http://catalog/item?id=7")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))

	r := <-receipts
	fmt.Println("outcome:", r.Outcome, "fast replica won:", r.WinnerTargetName == fast.URL)
	// Output:
	// 200 item 7
	// outcome: won fast replica won: true
}

// NewClient is the ready-made hedging client. A primary that answers 5xx
// is not an answer: the read goes to the other replica at once, and the
// caller sees only the good response.
func ExampleNewClient() {
	overloaded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer overloaded.Close()
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the healthy replica")
	}))
	defer healthy.Close()

	client, err := hedge.NewClient(hedge.TransportConfig{
		Targets: []string{overloaded.URL, healthy.URL},
		Policy:  hedge.Policy{Delay: 50 * time.Millisecond},
	})
	if err != nil {
		panic(err)
	}
	resp, err := client.Get("http://greeter/hello")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 hello from the healthy replica
}
