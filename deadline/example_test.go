package deadline_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
)

// A client's deadline crosses a real HTTP hop on 127.0.0.1: the Transport
// writes the remaining time, the server's Handler turns it back into a
// context deadline, and a request with too little time left is refused
// before any work starts.
func Example() {
	work := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		left, ok := deadline.Remaining(r.Context())
		fmt.Fprintf(w, "deadline %v, at most 2s away: %v", ok, left > 0 && left <= 2*time.Second)
	})
	srv := httptest.NewServer(deadline.Handler(work, deadline.Options{
		MinRemaining: 10 * time.Millisecond, // what the work needs at least
		Max:          30 * time.Second,      // what a client may ask for at most
	}))
	defer srv.Close()
	client := &http.Client{Transport: &deadline.Transport{Base: &http.Transport{}}}
	defer client.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))

	// An upstream hop said 5ms were left: not enough.
	req, _ = http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set(deadline.Header, "5m")
	resp, err = http.DefaultTransport.RoundTrip(req) // sent as is
	if err != nil {
		panic(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	fmt.Print(resp.StatusCode, " ", string(body))
	// Output:
	// 200 deadline true, at most 2s away: true
	// 504 {"error":"deadline: 5ms left, need at least 10ms"}
}

// Format picks the finest unit in which the duration fits in 8 digits, and
// truncates.
func ExampleFormat() {
	for _, d := range []time.Duration{
		90 * time.Millisecond,
		250 * time.Millisecond,
		2*time.Second + 345678901,
		36 * time.Hour,
		0,
	} {
		fmt.Printf("%v\t%s\n", d, deadline.Format(d))
	}
	// Output:
	// 90ms	90000000n
	// 250ms	250000u
	// 2.345678901s	2345678u
	// 36h0m0s	129600S
	// 0s	0n
}

func ExampleParse() {
	for _, s := range []string{"250m", "2S", "0n", "5 m"} {
		d, err := deadline.Parse(s)
		fmt.Println(d, err)
	}
	// Output:
	// 250ms <nil>
	// 2s <nil>
	// 0s <nil>
	// 0s deadline: malformed timeout "5 m": byte 1 is not an ASCII digit
}
