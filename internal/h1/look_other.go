//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package h1

import "net"

// initLook leaves c.raw nil: look reads with a deadline just ahead.
func (c *conn) initLook(net.Conn) {}
