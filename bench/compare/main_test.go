package compare

import (
	"io"
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

// hedgedhttp keeps a worker pool of goroutines alive for the life of the
// process (by design, not a leak of ours), so its pool worker is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/cristalhq/hedgedhttp.runInPool.func1"))
}

// TestSameAnswers checks that the three round trippers under comparison
// return the same body, so the benchmarks compare like with like.
func TestSameAnswers(t *testing.T) {
	b := &testing.B{}
	for name, rt := range map[string]interface {
		RoundTrip(*http.Request) (*http.Response, error)
	}{"bare": canned{}, "tailgate": tailgate(b, canned{}, nil), "hedgedhttp": hedged(b, canned{})} {
		req, _ := http.NewRequest(http.MethodGet, "http://a/x", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != string(body) {
			t.Errorf("%s: body %q", name, got)
		}
	}
}
