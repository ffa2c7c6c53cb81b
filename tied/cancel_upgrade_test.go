package tied

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// A peer that answers a cancel with 101 and holds the connection must not
// hold the cancel past CancelTimeout: the message counts as failed at once.
func TestCancelToPeerAnswering101FailsAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	letGo := sync.OnceFunc(func() { close(release) })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: evil\r\n\r\n"))
		<-release // hold the socket until the test ends
	}()
	defer func() { letGo(); ln.Close(); wg.Wait() }()

	s, err := NewServer(ServerConfig{CancelTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	acked := make(chan bool, 1)
	go func() { acked <- s.deliver("t1", "http://"+ln.Addr().String()+"/_tailgate/cancel/") }()
	// The bound is the CancelTimeout (5s); a stray 101 ends the message in
	// the time of one loopback exchange. Without the check, the read of
	// the handed-over connection lasts until the peer lets go.
	select {
	case ok := <-acked:
		if ok {
			t.Error("a 101 was taken as an acknowledged cancel")
		}
	case <-time.After(2 * time.Second):
		t.Error("the cancel message was still out 2s after a peer answered 101 (CancelTimeout 5s)")
		letGo()
		<-acked
	}
}
