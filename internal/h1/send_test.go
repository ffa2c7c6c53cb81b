package h1

import (
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// newSockWriter returns nc's sockWriter as a conn would set it up.
func newSockWriter(t *testing.T, nc net.Conn) *sockWriter {
	t.Helper()
	c := &conn{nc: nc}
	c.sw.nc = nc
	c.initLook(nc)
	if c.sw.raw == nil {
		t.Skip("not a socket here: sockWriter writes plainly")
	}
	return &c.sw
}

// A request's last flush writes it, then returns once the answer can be
// read, without having read it.
func TestSockWriterWritesThenWaitsForTheAnswer(t *testing.T) {
	client, server := tcpPair(t)
	w := newSockWriter(t, client)
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 5)
		io.ReadFull(server, buf)
		got <- buf
		time.Sleep(20 * time.Millisecond) // the writer waits meanwhile
		server.Write([]byte("answer"))
	}()
	w.await = true
	start := time.Now()
	n, err := w.Write([]byte("hello"))
	if n != 5 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Errorf("Write returned after %v, before the answer came", d)
	}
	if b := <-got; string(b) != "hello" {
		t.Fatalf("server read %q", b)
	}
	buf := make([]byte, 16)
	client.SetReadDeadline(time.Now().Add(time.Second))
	m, err := client.Read(buf)
	if string(buf[:m]) != "answer" || err != nil {
		t.Errorf("read after the wait: %q, %v", buf[:m], err)
	}
	if w.await {
		t.Error("await still set: the next write would wait too")
	}
}

// Without await, a Write is a plain write: it does not wait for an answer.
func TestSockWriterPlainWithoutAwait(t *testing.T) {
	client, server := tcpPair(t)
	w := newSockWriter(t, client)
	if n, err := w.Write([]byte("x")); n != 1 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(server, buf); err != nil || buf[0] != 'x' {
		t.Fatalf("server read %q, %v", buf, err)
	}
}

// A write larger than the socket takes at once finishes as a plain write
// once the peer reads.
func TestSockWriterLargeWriteFallsBack(t *testing.T) {
	client, server := tcpPair(t)
	w := newSockWriter(t, client)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<21) // 32 MiB: more than the socket buffers hold
	read := make(chan []byte, 1)
	go func() {
		time.Sleep(10 * time.Millisecond) // let the socket's buffer fill
		b := make([]byte, len(big))
		io.ReadFull(server, b)
		read <- b
		server.Close() // ends a wait, should the write have fitted after all
	}()
	w.await = true
	n, err := w.Write(big)
	if n != len(big) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(big))
	}
	if b := <-read; !bytes.Equal(b, big) {
		t.Error("the peer read other bytes than were written")
	}
}

// A write to a peer that reset the connection fails.
func TestSockWriterWriteError(t *testing.T) {
	client, server := tcpPair(t)
	w := newSockWriter(t, client)
	server.(*net.TCPConn).SetLinger(0) // close with a reset
	server.Close()
	time.Sleep(10 * time.Millisecond)
	var err error
	for range 3 { // the first write after a reset may still succeed
		w.await = true
		if _, err = w.Write([]byte("hello")); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("Write to a reset connection succeeded")
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Errorf("Write error = %v, want a reset or a broken pipe", err)
	}
}

// The connection closed during the wait (a cancellation's abort): the
// request was written, and the read that follows reports the close.
func TestSockWriterCloseDuringWait(t *testing.T) {
	client, server := tcpPair(t)
	w := newSockWriter(t, client)
	go func() {
		buf := make([]byte, 5)
		io.ReadFull(server, buf)
		time.Sleep(10 * time.Millisecond)
		client.Close()
	}()
	w.await = true
	if n, err := w.Write([]byte("hello")); n != 5 || err != nil {
		t.Fatalf("Write = %d, %v; want 5, nil (written)", n, err)
	}
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after the close: %v, want net.ErrClosed", err)
	}
}
