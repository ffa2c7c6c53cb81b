package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// -client-server is validated with a message naming it, documented with
// its default, and chooses the server of plain-HTTP clients: both serve
// reads; they differ on a request with an empty Host header, which
// net/http lets through to the gateway and h1 refuses itself.
func TestServeClientServerFlag(t *testing.T) {
	for _, v := range []string{"fasthttp", "H1", ""} {
		code, _, stderr := runCmd("serve", "-backends", "http://127.0.0.1:1", "-client-server", v)
		if code != exitUsage || !strings.Contains(stderr, "-client-server") {
			t.Errorf("-client-server %q: exit %d, stderr %q; want 2 naming the flag", v, code, stderr)
		}
	}
	_, stdout, _ := runCmd("serve", "-h")
	if !regexp.MustCompile(`-client-server string\n[^\n]*net/http[^\n]*\(default "h1"\)`).MatchString(stdout) {
		t.Errorf("serve -h lacks -client-server with its default:\n%s", stdout)
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "read") }))
	defer backend.Close()
	for _, c := range []struct {
		server    string
		emptyHost int
	}{{"h1", http.StatusBadRequest}, {"net/http", http.StatusOK}} {
		addr, _ := startServe(t, backend.URL, "-client-server", c.server)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(conn)
		for _, tc := range []struct {
			req  string
			code int
		}{{"GET /x HTTP/1.1\r\nHost: h\r\n\r\n", http.StatusOK}, {"GET /x HTTP/1.1\r\nHost:\r\n\r\n", c.emptyHost}} {
			io.WriteString(conn, tc.req)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: %q: %v", c.server, tc.req, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("-client-server %s: %q answered %d, want %d", c.server, tc.req, resp.StatusCode, tc.code)
			}
		}
	}
}
