package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tailgate-dev/tailgate/gateway"
)

// The admin handler still serves the gateway's other endpoints and refuses
// other methods on /metrics, as the gateway's own handler does.
func TestAdminHandlerKeepsGatewayEndpoints(t *testing.T) {
	g, err := gateway.New(gateway.Config{Backends: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	h := adminHandler(g, processRegistry(), nil)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/healthz", 200, "ok"},
		{"GET", "/debug/replicas", 200, `"mode": "hedge"`},
		{"GET", "/metrics", 200, "go_goroutines"},
		{"GET", "/metrics", 200, "tailgate_requests_total"},
		{"POST", "/metrics", 405, ""},
		{"GET", "/nope", 404, ""},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("%s %s: %d, want %d with %q", tc.method, tc.path, w.Code, tc.code, tc.body)
		}
	}
}
