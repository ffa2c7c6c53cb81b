package memnet

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// A Pipe behaves as a socket where net.Pipe does not: a write never waits
// for a read, Buffered tells what has arrived without waiting, a read
// deadline ends a read, and a close is EOF at the other end once what was
// written before it is read.
func TestPipe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := Pipe()
		if n, err := b.Buffered(); n != 0 || err != nil {
			t.Fatalf("Buffered of a new pipe: %d, %v", n, err)
		}
		if _, err := a.Write([]byte("hello")); err != nil { // no reader: must not block
			t.Fatal(err)
		}
		if n, err := b.Buffered(); n != 5 || err != nil {
			t.Fatalf("Buffered after 5 bytes: %d, %v", n, err)
		}
		buf := make([]byte, 3)
		if n, _ := b.Read(buf); string(buf[:n]) != "hel" {
			t.Fatalf("read %q", buf[:n])
		}
		start := time.Now()
		b.SetReadDeadline(start.Add(time.Second))
		b.Read(buf) // "lo"
		if _, err := b.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("read past the deadline: %v after %v", err, time.Since(start))
		}
		b.SetReadDeadline(time.Time{})
		a.Write([]byte("x"))
		a.Close()
		if n, err := b.Buffered(); n != 1 || err != nil {
			t.Fatalf("Buffered of a closed peer with a byte left: %d, %v", n, err)
		}
		if rest, err := io.ReadAll(b); string(rest) != "x" || err != nil {
			t.Fatalf("after the peer closed: %q, %v", rest, err)
		}
		if _, err := b.Buffered(); err != io.EOF {
			t.Fatalf("Buffered of a closed peer: %v; want EOF", err)
		}
		b.Close()
		if _, err := b.Read(buf); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read after Close: %v", err)
		}
	})
}
