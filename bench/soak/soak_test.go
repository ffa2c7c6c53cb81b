package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each fault mode does to a client what its description says.
func TestFaultyModes(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		check func(resp *http.Response, body string, err error) bool
	}{
		{"ok", func(r *http.Response, b string, err error) bool {
			return err == nil && r.StatusCode == 200 && strings.Contains(b, `"value":"faulty:`)
		}},
		{"slow", func(r *http.Response, b string, err error) bool { return err == nil && r.StatusCode == 200 }},
		{"5xx", func(r *http.Response, b string, err error) bool { return err == nil && r.StatusCode == 503 }},
		{"bigheader", func(r *http.Response, b string, err error) bool {
			return err == nil && r.StatusCode == 200 && len(r.Header.Get("X-Big")) == 70<<10
		}},
		{"hang", func(r *http.Response, b string, err error) bool { return isTimeout(err) }},
		{"trickle", func(r *http.Response, b string, err error) bool {
			return r != nil && r.StatusCode == 200 && isTimeout(err)
		}},
		{"reset", func(r *http.Response, b string, err error) bool { return err != nil && !isTimeout(err) }},
		{"garbage", func(r *http.Response, b string, err error) bool { return err != nil && !isTimeout(err) }},
		{"upgrade", func(r *http.Response, b string, err error) bool {
			return (err != nil && !isTimeout(err)) || (r != nil && r.StatusCode == 101)
		}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			f := &faulty{modes: []string{tc.mode}, hold: 5 * time.Second, slow: 50 * time.Millisecond}
			done := make(chan struct{})
			go func() { f.run(ln); close(done) }()
			tr := &http.Transport{}
			client := &http.Client{Transport: tr, Timeout: 300 * time.Millisecond}
			begin := time.Now()
			resp, err := client.Get("http://" + ln.Addr().String() + "/item?id=1")
			var body string
			if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
				resp.Body.Close() // the connection itself: reading would wait for the hold
			} else if err == nil {
				var b []byte
				b, err = io.ReadAll(resp.Body)
				body = string(b)
				resp.Body.Close()
			}
			took := time.Since(begin)
			tr.CloseIdleConnections()
			ln.Close()
			<-done // every connection ended
			if !tc.check(resp, body, err) {
				t.Errorf("%s: response %v, body %q, err %v", tc.mode, resp, body, err)
			}
			if tc.mode == "slow" && took < 50*time.Millisecond {
				t.Errorf("slow answered after %v", took)
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Ending below the start passes; above it by more than the tolerance, in
// either measure, fails.
func TestWithin(t *testing.T) {
	start := snapshot{rss: 100, goroutines: 50}
	for _, tc := range []struct {
		end  snapshot
		want bool
	}{
		{snapshot{rss: 100, goroutines: 50}, true},
		{snapshot{rss: 60, goroutines: 10}, true},
		{snapshot{rss: 110, goroutines: 55}, true},
		{snapshot{rss: 111, goroutines: 50}, false},
		{snapshot{rss: 100, goroutines: 56}, false},
	} {
		if got := tc.end.within(start, 0.10); got != tc.want {
			t.Errorf("%+v within 10%% of %+v: %v, want %v", tc.end, start, got, tc.want)
		}
	}
}
