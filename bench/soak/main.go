// Command soak is the helper of bench/soak.sh: replicas that misbehave,
// and a driver that mixes normal reads with client abuse against a
// running gateway and judges how it came out. Everything binds and targets
// loopback addresses only, and every wait is bounded.
//
//	soak faulty -listen 127.0.0.1:19181 [-modes ok,hang,reset,...] [-hold 30s]
//	soak drive -target 127.0.0.1:19180 -admin 127.0.0.1:19190 -timeout 2s -duration 5m
//	soak idle -target 127.0.0.1:19180 -n 5000   (holds idle connections until a line on stdin)
//
// See "soak faulty -h", "soak drive -h" and "soak idle -h" for the flags.
package main

import (
	"fmt"
	"net"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: soak faulty|drive|idle [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "faulty":
		err = runFaulty(os.Args[2:])
	case "drive":
		var ok bool
		ok, err = runDrive(os.Args[2:], os.Stdout)
		if err == nil && !ok {
			os.Exit(1)
		}
	case "idle":
		err = runIdle(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want faulty, drive or idle", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak %s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
}

// loopback refuses an address that is not host:port on a loopback IP.
func loopback(flag, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s %q: want a loopback host:port such as 127.0.0.1:19180", flag, addr)
	}
	return nil
}
