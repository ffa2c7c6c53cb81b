// Package tied is the lab experiment "tailgate lab tied": the shape of
// Table 2 of The Tail at Scale, an idle and a loaded cluster read without
// hedging, hedged, and with tied requests, every copy accounted for at the
// servers.
package tied
