package tied_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/tied"
)

// Whatever the tie headers hold, a request is served, counted once as tied
// or untied, and a cancel goes out only for a valid tie naming a listed
// peer. Whatever a cancel's query holds, the endpoint answers 204 or 400.
func FuzzTieHeaders(f *testing.F) {
	f.Add("T1", "http://b", "tie=T1")
	f.Add("", "http://b", "tie=")
	f.Add("a b", "HTTP://B:80", "tie=a%20b")
	f.Add(strings.Repeat("x", 65), "http://b/x", "tie=T1&tie=T2")
	f.Add("T1", "http://[::1]:80", "x")
	f.Fuzz(func(t *testing.T, tie, peer, query string) {
		var sent int
		s, err := tied.NewServer(tied.ServerConfig{
			Workers:         1,
			Peers:           []string{"http://b"},
			CancelTransport: countingAck{&sent},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		h := s.Handler(noop)
		req := httptest.NewRequest("GET", "http://a/x", nil)
		req.Header[tiedwire.TieHeader] = []string{tie}
		req.Header[tiedwire.PeerHeader] = []string{peer}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		s.Shutdown(t.Context())
		st := s.Stats()
		if rec.Code != 200 || st.Tied+st.Untied != 1 || st.Dequeued != 1 {
			t.Fatalf("%q %q: %d %+v", tie, peer, rec.Code, st)
		}
		if st.Tied == 1 && (!tiedwire.ValidTie(tie) || sent != 1) {
			t.Fatalf("%q %q tied, %d cancels", tie, peer, sent)
		}
		if st.Tied == 0 && sent != 0 {
			t.Fatalf("%q %q untied, %d cancels", tie, peer, sent)
		}

		creq := httptest.NewRequest("POST", "http://a"+tied.DefaultCancelPath, nil)
		creq.URL.RawQuery = query
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, creq)
		valid := strings.HasPrefix(query, "tie=") && tiedwire.ValidTie(query[4:])
		if want := map[bool]int{true: 204, false: 400}[valid]; rec.Code != want {
			t.Fatalf("cancel ?%q: %d, want %d", query, rec.Code, want)
		}
	})
}

// countingAck answers cancels at once and counts them; one goroutine at a
// time in the fuzz test, as the Server is shut down before it is read.
type countingAck struct{ n *int }

func (c countingAck) RoundTrip(*http.Request) (*http.Response, error) {
	*c.n++
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}}, nil
}

func TestStatsJSON(t *testing.T) {
	b, err := json.Marshal(tied.Stats{DroppedByTwin: 1, BothExecuted: 2, CancelsFailed: 3, MaxQueued: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"droppedByTwin":1`, `"bothExecuted":2`, `"cancelsFailed":3`, `"maxQueued":4`, `"droppedOnArrival":0`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("%s lacks %s", b, k)
		}
	}
}
