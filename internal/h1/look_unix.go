//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package h1

import (
	"net"
	"syscall"
)

// initLook prepares c.look for nc: its socket, and the function the
// poller runs on it, made once so that a look allocates nothing.
func (c *conn) initLook(nc net.Conn) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	c.raw = raw
	c.lookFn = c.lookFD
	c.sw.raw = raw
	c.sw.fn = c.sw.sendFD
}

// lookFD peeks at what fd has received, without waiting: one recv with
// MSG_PEEK|MSG_DONTWAIT, which leaves the bytes where they are. It says
// it is done whatever it finds, so that the poller never waits.
func (c *conn) lookFD(fd uintptr) bool {
	c.lookN, _, c.lookErr = syscall.Recvfrom(int(fd), c.lookBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true
}
