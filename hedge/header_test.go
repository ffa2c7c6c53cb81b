package hedge

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// A request that arrives marked as a hedge (a gateway forwarding what was a
// hedge upstream) keeps its mark on the primary, as HedgeHeader documents;
// a hedge of it is re-marked with its own attempt index.
func TestPrimaryForwardsIncomingHedgeHeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: time.Millisecond, body: "a"}
		tr, _ := newMemTransport(t, Policy{Delay: time.Second}, TransportConfig{Targets: []string{"http://a"}}, map[string]*backend{"a": a})
		req, _ := http.NewRequest("GET", "http://x/", nil)
		req.Header.Set(HedgeHeader, "1")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		synctest.Wait()
		if got := a.seen(); got[0] != "1" {
			t.Errorf("primary sent with %s: %q, want the caller's 1", HedgeHeader, got[0])
		}
	})
}
