package jsonerr

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The message is escaped as JSON, the status and headers set, and the
// caller's own headers kept.
func TestWrite(t *testing.T) {
	w := httptest.NewRecorder()
	w.Header().Set("Retry-After", "1")
	n := Write(w, http.StatusServiceUnavailable, `busy "now"`+"\n")
	if w.Code != 503 || w.Body.String() != `{"error":"busy \"now\"\n"}`+"\n" || n != w.Body.Len() {
		t.Errorf("%d %q, length %d", w.Code, w.Body.String(), n)
	}
	h := w.Header()
	if h.Get("Content-Type") != "application/json" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Retry-After") != "1" {
		t.Errorf("headers %v", h)
	}
}
