package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tailgate-dev/tailgate/gateway"
)

// adminView reads g's admin endpoint path (/debug/replicas, say) into v,
// as an operator's tools read it, and returns its status.
func adminView(t *testing.T, g *gateway.Gateway, path string, v any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	g.Admin().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return rec.Code
}

// replicasView is what the tests read of /debug/replicas.
type replicasView struct {
	Mode  string `json:"mode"`
	Hedge struct {
		DelayMs float64 `json:"delayMs"`
	} `json:"hedge"`
	Tied *struct {
		DelayMs float64 `json:"delayMs"`
	} `json:"tied"`
	InFlight struct {
		MaxRequests int64 `json:"maxRequests"`
		MaxAttempts int64 `json:"maxAttempts"`
	} `json:"inFlight"`
	Draining []struct {
		Name     string `json:"name"`
		InFlight int64  `json:"inFlight"`
	} `json:"draining"`
}

func debugReplicas(t *testing.T, g *gateway.Gateway) replicasView {
	t.Helper()
	var v replicasView
	if code := adminView(t, g, "/debug/replicas", &v); code != http.StatusOK {
		t.Fatalf("/debug/replicas: %d", code)
	}
	return v
}

// routeView is what the tests read of a route in /debug/routes.
type routeView struct {
	Name    string   `json:"name"`
	Methods []string `json:"methods"`
	Delay   string   `json:"delay"`
}

func debugRoutes(t *testing.T, g *gateway.Gateway) []routeView {
	t.Helper()
	var v struct {
		Routes []routeView `json:"routes"`
	}
	if code := adminView(t, g, "/debug/routes", &v); code != http.StatusOK {
		t.Fatalf("/debug/routes: %d", code)
	}
	return v.Routes
}

// partitionsView is what the tests read of /debug/partitions; ok is false
// when affinity mode is off (404).
type partitionsView struct {
	Key    string `json:"key"`
	Owners int    `json:"owners"`
}

func debugPartitions(t *testing.T, g *gateway.Gateway) (v partitionsView, ok bool) {
	t.Helper()
	return v, adminView(t, g, "/debug/partitions", &v) == http.StatusOK
}
