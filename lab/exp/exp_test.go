package exp

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/load/loadtest"
)

func TestAcceptValue(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"value":"x"}`: true, `{"value":""}`: false, `{"value":3}`: false, `{}`: false, `not json`: false, ``: false,
	} {
		resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}
		if err := AcceptValue(resp); (err == nil) != ok {
			t.Errorf("%q: %v", body, err)
		}
	}
	resp := &http.Response{StatusCode: 503, Body: io.NopCloser(strings.NewReader(`{"value":"x"}`))}
	if err := AcceptValue(resp); !errors.Is(err, errNotValue) || !strings.Contains(err.Error(), "503") {
		t.Errorf("503: %v", err)
	}
}

func TestLatencyRowShowsFailedPercentiles(t *testing.T) {
	row := LatencyRow("x", load.Summarize(loadtest.Outcomes(98, 10*time.Millisecond, 2, 0), time.Second))
	if want := []string{"x", "10.0", "10.0", "failed", "failed", "failed"}; strings.Join(row, "|") != strings.Join(want, "|") {
		t.Errorf("row %q, want %q", row, want)
	}
	if row := LatencyRow("y", load.Summarize(nil, 0)); row[1] != "—" || row[5] != "—" {
		t.Errorf("no requests: row %q", row)
	}
}
