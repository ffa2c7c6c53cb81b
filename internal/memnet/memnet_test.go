package memnet

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr Transport
		done := make(chan string, 1)
		tr.Handle("a", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host != "a" {
				t.Errorf("host %q", r.Host)
			}
			if !Sleep(r.Context(), 10*time.Millisecond) {
				time.Sleep(10 * time.Millisecond) // keeps working after cancel
				done <- "finished after cancel"
				return
			}
			io.WriteString(w, "hi")
		}))
		req, _ := http.NewRequest("GET", "http://a/", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "hi" || time.Since(start) != 10*time.Millisecond {
			t.Errorf("%q after %v", b, time.Since(start))
		}
		// Cancellation returns at once; the handler goes on.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Millisecond)
		defer cancel()
		req, _ = http.NewRequestWithContext(ctx, "GET", "http://a/", nil)
		start = time.Now()
		if _, err := tr.RoundTrip(req); err != context.DeadlineExceeded || time.Since(start) != 3*time.Millisecond {
			t.Errorf("err %v after %v", err, time.Since(start))
		}
		tr.Wait()
		if got := <-done; got != "finished after cancel" {
			t.Error(got)
		}
		if _, err := tr.RoundTrip(req); err == nil {
			t.Error("done context accepted")
		}
		req, _ = http.NewRequest("GET", "http://nowhere/", nil)
		if _, err := tr.RoundTrip(req); err == nil {
			t.Error("unknown host accepted")
		}
	})
}
