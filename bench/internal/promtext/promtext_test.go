package promtext

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestScrapeAndSum(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "# HELP x y\n# TYPE a counter\na{k=\"1\"} 2\na{k=\"2\"} 3.5\nab 100\nnospace\nbad NaNx\n")
	}))
	defer srv.Close()
	m, err := Scrape(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum("a"); got != 5.5 {
		t.Errorf("Sum(a) = %v, want 5.5 (not ab's 100)", got)
	}
	if got := m[`a{k="2"}`]; got != 3.5 {
		t.Errorf(`a{k="2"} = %v, want 3.5`, got)
	}
	if len(m) != 3 {
		t.Errorf("%d series, want 3 (comments, a line without a value and a bad value skipped): %v", len(m), m)
	}
}

func TestScrapeRefusesNonOK(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if _, err := Scrape(strings.TrimPrefix(srv.URL, "http://")); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("err = %v, want the 404 named", err)
	}
}

// The gateway's read series carry a route label beside their own: the
// sums by label see through it.
func TestSumWithAndByLabel(t *testing.T) {
	m := Metrics{
		`tailgate_attempts_total{role="primary",route="default"}`: 10,
		`tailgate_attempts_total{role="primary",route="search"}`:  5,
		`tailgate_attempts_total{role="hedge",route="default"}`:   2,
		`tailgate_attempts_total_other{role="primary"}`:           100,
		`tailgate_requests_total{code="200",route="default"}`:     7,
		`tailgate_requests_total{code="0",route="default"}`:       1,
		`tailgate_requests_total{code="200",route="search"}`:      3,
	}
	if got := m.SumWith("tailgate_attempts_total", `role="primary"`); got != 15 {
		t.Errorf("SumWith(role=primary) = %v, want 15", got)
	}
	if got := m.SumWith("tailgate_requests_total", `code="0"`); got != 1 {
		t.Errorf("SumWith(code=0) = %v, want 1", got)
	}
	got := m.ByLabel("tailgate_requests_total", "code")
	if len(got) != 2 || got["200"] != 10 || got["0"] != 1 {
		t.Errorf("ByLabel(code) = %v, want 200:10 0:1", got)
	}
}
