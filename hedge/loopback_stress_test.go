package hedge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Real net/http over loopback derives a context from the attempt context at
// the start of every round trip. A hedge that starts just as the primary
// wins must neither hang in that derivation nor outlive the operation.
func TestLoopbackNoStuckAttempts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Microsecond)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	base := NewBaseTransport()
	defer base.CloseIdleConnections()
	p := Policy{Delay: 300 * time.Microsecond, Budget: mustBudget(t, 1, 1e9), Gate: Gate{Disabled: true}}
	tr, err := NewTransport(TransportConfig{Base: base, Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("request %d: RoundTrip hung", i)
		}
	}
	// Every attempt must be gone once the observation window has passed.
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<22)
		n := runtime.Stack(buf, true)
		c := strings.Count(string(buf[:n]), "hedge.(*operation")
		if c == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutine(s) of finished operations still running:\n%s", c, buf[:n])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
