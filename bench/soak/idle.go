package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// runIdle opens -n connections to the gateway, sends one GET on each and
// reads its answer, then holds them all idle until a line (or EOF) on
// stdin, and closes them: the wave of idle keep-alive connections that
// memory is measured around (see the report of issue 11).
func runIdle(args []string) error {
	fs := flag.NewFlagSet("soak idle", flag.ExitOnError)
	target := fs.String("target", "127.0.0.1:19180", "the gateway's client address")
	n := fs.Int("n", 5000, "connections to open and hold (at most 20,000)")
	fs.Parse(args)
	if err := loopback("-target", *target); err != nil {
		return err
	}
	if *n < 1 || *n > 20000 {
		return fmt.Errorf("-n %d: want 1 to 20,000", *n)
	}
	var (
		mu     sync.Mutex
		conns  []net.Conn
		failed int
		wg     sync.WaitGroup
	)
	sem := make(chan struct{}, 64) // opening at most 64 at once
	for i := range *n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", *target, 5*time.Second)
			if err == nil {
				status := rawRequest(c, fmt.Sprintf("GET /item?id=%d HTTP/1.1\r\nHost: soak\r\n\r\n", i), "GET", 10*time.Second)
				if status != "200" {
					c.Close()
					err = fmt.Errorf("answered %s", status)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			conns = append(conns, c)
		})
	}
	wg.Wait()
	fmt.Printf("open %d, failed %d; a line on stdin closes them\n", len(conns), failed)
	bufio.NewReader(os.Stdin).ReadString('\n')
	for _, c := range conns {
		c.Close()
	}
	fmt.Println("closed")
	return nil
}
