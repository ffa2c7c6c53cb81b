package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Fault modes: what the replica does with one request. A connection ends
// with every mode but ok, slow and 5xx.
var faultModes = map[string]string{
	"ok":        "answers 200 with a JSON value at once",
	"slow":      "answers 200 after -slow",
	"5xx":       "answers 503 at once",
	"hang":      "reads the request and never answers (until the gateway gives up, or -hold)",
	"reset":     "resets the connection (RST) instead of answering",
	"garbage":   "writes bytes that are not HTTP, then closes",
	"trickle":   "sends headers promising 64 bytes, then one byte every 100ms",
	"upgrade":   "answers 101 Switching Protocols, then holds the connection",
	"bigheader": "answers 200 with a 70 KiB header block",
}

// faulty is a replica that takes its fault modes in turn, one a request,
// so that the gateway sees every fault often and never long the same one.
type faulty struct {
	modes []string
	next  atomic.Uint64
	hold  time.Duration
	slow  time.Duration
}

func runFaulty(args []string) error {
	fs := flag.NewFlagSet("soak faulty", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:19181", "loopback address to listen on")
	modes := fs.String("modes", "ok,ok,ok,hang,reset,garbage,trickle,slow,5xx", "fault modes, taken in turn, one a request (repeat one to weight it)")
	hold := fs.Duration("hold", 30*time.Second, "longest any connection is held (bounds hang, upgrade, trickle)")
	slow := fs.Duration("slow", 500*time.Millisecond, "the delay of mode slow")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: soak faulty [flags]\n\nModes:")
		for _, m := range []string{"ok", "slow", "5xx", "hang", "reset", "garbage", "trickle", "upgrade", "bigheader"} {
			fmt.Fprintf(fs.Output(), "  %-9s %s\n", m, faultModes[m])
		}
		fs.PrintDefaults()
	}
	fs.Parse(args)
	if err := loopback("-listen", *listen); err != nil {
		return err
	}
	f := &faulty{hold: *hold, slow: *slow}
	for _, m := range strings.Split(*modes, ",") {
		if _, ok := faultModes[m]; !ok {
			return fmt.Errorf("-modes: unknown mode %q", m)
		}
		f.modes = append(f.modes, m)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() { <-stop; ln.Close() }()
	fmt.Printf("faulty replica at http://%s: %s\n", ln.Addr(), *modes)
	f.run(ln)
	return nil
}

// run serves connections from ln until it is closed, and returns when
// every connection has ended (each within -hold).
func (f *faulty) run(ln net.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Go(func() { f.serve(c) })
	}
}

func (f *faulty) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		c.SetDeadline(time.Now().Add(f.hold)) // bounds every mode's waits and writes
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
		n := f.next.Add(1)
		switch f.modes[n%uint64(len(f.modes))] {
		case "ok":
			writeOK(c, req, n, "")
		case "slow":
			time.Sleep(f.slow)
			writeOK(c, req, n, "")
		case "bigheader":
			writeOK(c, req, n, "X-Big: "+strings.Repeat("b", 70<<10)+"\r\n")
		case "5xx":
			io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
		case "hang":
			io.Copy(io.Discard, c) // until the gateway closes, or the deadline
			return
		case "upgrade":
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: soak\r\nConnection: Upgrade\r\n\r\n")
			io.Copy(io.Discard, c)
			return
		case "reset":
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			return
		case "garbage":
			io.WriteString(c, "HTTP/1.1 2oo NOT\r\n\x00\xff\xfe garbage \r\n\r\n")
			return
		case "trickle":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n")
			for range 64 {
				time.Sleep(100 * time.Millisecond)
				if _, err := c.Write([]byte{' '}); err != nil {
					return
				}
			}
			return
		}
	}
}

// writeOK answers as the lab's fixtures do: {"value": "faulty:<n>"}.
func writeOK(c net.Conn, req *http.Request, n uint64, extra string) {
	body := fmt.Sprintf(`{"value":"faulty:%d"}`+"\n", n)
	head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n", len(body), extra)
	if req.Method == http.MethodHead {
		body = ""
	}
	io.WriteString(c, head+body)
}
