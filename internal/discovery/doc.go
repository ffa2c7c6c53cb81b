// Package discovery turns the gateway's backend list, where some entries
// are DNS names, into replica URLs, and keeps them current: a Watcher
// re-resolves each name every refresh interval (sooner when the records'
// TTL is shorter) and hands the merged list to a callback when it changes,
// which the gateway applies as a reload (gateway.Gateway.SetBackends), so
// that kept replicas keep their state, new ones start cold and removed
// ones drain.
//
// Entries, as Parse reads them:
//
//	http://10.0.0.1:8080               a static backend, passed through
//	dns+http://replicas.ns.svc:8080    every A and AAAA record, on that port
//	dnssrv+http://_http._tcp.replicas  every SRV record: its target's A and
//	                                   AAAA records, on the record's port
//
// https in place of http gives https replicas. Names resolve to addresses
// here, off the request path, and the replicas are those addresses: the
// backend transport never looks a name up while a read waits, and with a
// -dns-server override every lookup goes to that server.
//
// What it never does: empty the set. A failed resolution (SERVFAIL, a
// timeout) or an empty one (no records, NXDOMAIN) keeps the name's last
// good set; it is logged when it starts and when it ends, not at every
// refresh, and counted, and State says the name is stale.
//
// It lives apart from the library packages (hedge, replica), which know
// nothing of DNS, and from the gateway, which knows only a backend list.
package discovery
