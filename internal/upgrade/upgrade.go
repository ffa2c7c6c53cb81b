// Package upgrade refuses a protocol switch (101) that a request did not
// ask for, before anything reads the response's body.
//
// Why it must come first: for a 101 net/http's Transport hands the caller
// the raw connection as the body and stops watching the request's context
// (the caller owns the connection now). Reading that body to its end, as
// the hedge engine does to choose a complete winner, then lasts until the
// server closes: past every deadline, with the attempt's slot held, the
// breaker unaware, and (for an inline primary, which runs on the caller's
// goroutine) the caller itself stuck. Only Close ends it, so the first
// code to see the response must decide, before any read: the hedge
// Transport for every attempt, and whatever else sends requests with a
// Transport's base (the gateway's shadow reads, the tied cancels).
package upgrade

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrUnexpected is the error of a response that switched protocols (101)
// although its request asked for no upgrade (hedge.ErrUnexpectedUpgrade).
var ErrUnexpected = errors.New("hedge: 101 Switching Protocols to a request that asked for no upgrade")

// Requested reports whether h asks for a protocol switch (WebSocket, h2c).
func Requested(h http.Header) bool {
	if len(h["Upgrade"]) > 0 {
		return true
	}
	for _, v := range h["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// RefuseStray returns nil unless resp switches protocols (101) although
// req asked for no upgrade; then it closes resp's body and returns an
// error wrapping ErrUnexpected. A 101 without Upgrade headers (an empty
// body on a connection net/http closes) is refused too: it is not an
// answer.
func RefuseStray(req *http.Request, resp *http.Response) error {
	if resp.StatusCode != http.StatusSwitchingProtocols || Requested(req.Header) {
		return nil
	}
	if resp.Body != nil {
		resp.Body.Close() // the connection itself, when net/http handed it over
	}
	if u := resp.Header.Get("Upgrade"); u != "" {
		return fmt.Errorf("%w (Upgrade: %.64q)", ErrUnexpected, u)
	}
	return ErrUnexpected
}
