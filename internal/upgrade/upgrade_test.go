package upgrade

import (
	"errors"
	"io"
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRefuseStray(t *testing.T) {
	asked := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}
	for _, c := range []struct {
		name   string
		header http.Header
		status int
		want   bool
	}{
		{"200", nil, 200, false},
		{"101 unasked", nil, 101, true},
		{"101 asked", asked, 101, false},
		{"101 to Upgrade without Connection", http.Header{"Upgrade": {"h2c"}}, 101, false},
	} {
		req := &http.Request{Method: http.MethodGet, Header: c.header}
		body := &closeCounter{}
		err := RefuseStray(req, &http.Response{StatusCode: c.status, Body: body})
		if got := errors.Is(err, ErrUnexpected); got != c.want || body.closed != c.want {
			t.Errorf("%s: err %v, body closed %v; want refused %v", c.name, err, body.closed, c.want)
		}
	}
}

type closeCounter struct{ closed bool }

func (c *closeCounter) Read([]byte) (int, error) { return 0, io.EOF }
func (c *closeCounter) Close() error             { c.closed = true; return nil }
