package tied_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/tied"
)

// scriptedBase answers the second copy (host b) with a 503 dropped for its
// twin, and fails the first copy (host a) at the transport level once b's
// answer has been handed back: the copy that started dies after its twin
// was dropped.
type scriptedBase struct{ bDone chan struct{} }

func (s scriptedBase) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == "b" {
		defer close(s.bDone)
		return &http.Response{
			StatusCode: http.StatusServiceUnavailable, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:  http.Header{tiedwire.DroppedHeader: {tiedwire.DroppedQueued}},
			Body:    io.NopCloser(strings.NewReader("")),
			Request: req,
		}, nil
	}
	<-s.bDone
	return nil, errors.New("connection reset by peer")
}

// A dropped answer is never the result of a tied request: when the copy
// that ran fails at the transport level after its twin was dropped, the
// engine keeps the refused 503 over the later error, and the Transport
// must return the failure instead.
func TestDroppedAnswerIsNeverTheResult(t *testing.T) {
	tr, err := tied.NewTransport(tied.TransportConfig{
		Base:    scriptedBase{bDone: make(chan struct{})},
		Targets: []string{"http://a", "http://b"},
		Delay:   -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	resp, err := tr.RoundTrip(req)
	if err == nil {
		defer resp.Body.Close()
		t.Fatalf("tied.Transport returned %d %v; want the surviving copy's error", resp.StatusCode, resp.Header)
	}
	if !strings.Contains(err.Error(), "connection reset by peer") || errors.Is(err, tied.ErrNoAnswer) {
		t.Errorf("error %v: want the failure of the copy that ran", err)
	}
}
