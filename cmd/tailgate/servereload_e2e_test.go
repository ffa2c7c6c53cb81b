package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestServeReloadsOnSIGHUP is the whole path an operator takes: the real
// binary (this test executable re-executed as main, as
// TestServeDrainsOnSIGTERM does) serves with a config file and two
// replicas; the file is rewritten to add a third, and a real SIGHUP sent.
// Reads reach the third replica, while a slow read in flight across the
// reload completes with 200, its hedge kept to the replicas it began with.
//
// A separate process rather than serve in this one: the signal is then
// sent and received exactly as in production (signal.Notify in runServe,
// the serve loop), and a SIGHUP to the test process itself would reach
// every test's Notify at once, or kill it if none were listening.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	rs := newReplicas(t, 3)
	conf := func(n int) string {
		var b strings.Builder
		b.WriteString("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nhedge-delay: 20ms\nprobation: false\nbackends:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - %s\n", rs.url(i))
		}
		return b.String()
	}
	path := writeTestFile(t, "tailgate.yaml", conf(2))
	cmd := exec.Command(os.Args[0], "serve", "-config", path, "-drain-timeout", "5s")
	cmd.Env = append(os.Environ(), "TAILGATE_TEST_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var mu sync.Mutex
	var logs strings.Builder
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	waitFor := func(re string) []string {
		t.Helper()
		rx := regexp.MustCompile(re)
		timeout := time.After(10 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the gateway exited before logging %s", re)
				}
				if m := rx.FindStringSubmatch(l); m != nil {
					return m
				}
			case <-timeout:
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("no log line matching %s within 10s in:\n%s", re, logs.String())
			}
		}
	}
	addr := waitFor(`msg="gateway listening" addr=(\S+)`)[1]
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	get := func(path string) (int, string) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for range 10 {
		if code, body := get("/item"); code != 200 {
			t.Fatalf("read before the reload: %d %s", code, body)
		}
	}
	if rs.count(2, "/item") != 0 {
		t.Fatal("the third replica got reads before it was configured")
	}

	// A slow read: its primary and, 20ms later, its hedge are held.
	slow := make(chan string, 1)
	go func() {
		code, body := get("/slow")
		slow <- fmt.Sprint(code, " ", body)
	}()
	for range 2 {
		select {
		case <-rs.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the slow read and its hedge did not reach the replicas")
		}
	}

	if err := os.WriteFile(path, []byte(conf(3)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(`msg="configuration reloaded" trigger=SIGHUP .*changed=backends added=` + regexp.QuoteMeta(rs.url(2)))
	for i := 0; rs.count(2, "/item") == 0; i++ {
		if i == 50 {
			t.Fatalf("no read of 50 reached the third replica after the reload")
		}
		if code, body := get("/item"); code != 200 {
			t.Fatalf("read after the reload: %d %s", code, body)
		}
	}
	select {
	case got := <-slow:
		t.Fatalf("the slow read ended before it was released: %s", got)
	default:
	}
	rs.release()
	if got := <-slow; !strings.HasPrefix(got, "200 replica ") {
		t.Errorf("slow read in flight across the reload: %q, want 200", got)
	}
	if n := rs.count(2, "/slow"); n != 0 {
		t.Errorf("the third replica got %d attempts of a read that began before it was added", n)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			mu.Lock()
			t.Errorf("exit: %v\n%s", err, logs.String())
			mu.Unlock()
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not exit after SIGTERM")
	}
}
