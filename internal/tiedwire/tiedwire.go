// Package tiedwire is the tied-request protocol's vocabulary on the wire:
// its headers, their values and the tie identity. Its three
// implementations share it: package tied (the HTTP server middleware and
// client transport), the gateway's tied mode and hedgegrpc, which carries
// the same identities in gRPC metadata. Users of tied need none of it (a
// tied.Transport sets the headers, a tied.Server reads them, tied.Dropped
// tells a dropped copy's answer); servers in other languages read the
// strings, which docs/library.md lists.
package tiedwire

import "crypto/rand"

// Headers of the tied-request protocol.
const (
	// TieHeader carries a tied copy's tie identity: an opaque token, the
	// same on both copies of a request, that ValidTie accepts.
	TieHeader = "Tailgate-Tie"

	// PeerHeader carries the base URL of the server that holds the copy's
	// twin ("http://10.0.0.2:8080"). A tied.Server sends cancels only to
	// peers in its allow-list (tied.ServerConfig.Peers): a request naming
	// another address is served untied.
	PeerHeader = "Tailgate-Tie-Peer"

	// DroppedHeader marks a server's answer to a copy it dropped because
	// its twin started elsewhere (status 503). Its value says when:
	// DroppedQueued or DroppedOnArrival. Clients must not take such an
	// answer as the result: the twin's answer is on its way.
	DroppedHeader = "Tailgate-Tie-Dropped"

	// CancelOutcomeHeader is set on the cancel endpoint's 204 answer:
	// CancelDropped, CancelStarted or CancelRemembered.
	CancelOutcomeHeader = "Tailgate-Tie-Cancel"

	// TokenHeader carries tied.ServerConfig.CancelToken on cancel
	// messages.
	TokenHeader = "Tailgate-Tie-Token"
)

// Values of DroppedHeader.
const (
	// DroppedQueued: the copy was waiting in the queue when its twin's
	// server said the twin had started.
	DroppedQueued = "queued"
	// DroppedOnArrival: the twin's cancel arrived before the copy did.
	DroppedOnArrival = "arrival"
)

// Values of CancelOutcomeHeader.
const (
	// CancelDropped: the copy was queued here and has been dropped.
	CancelDropped = "dropped"
	// CancelStarted: the copy had already started (or finished) here, so
	// both copies executed.
	CancelStarted = "started"
	// CancelRemembered: no copy of the tie is here (yet); the tie is
	// remembered, and a copy arriving within tied.ServerConfig.RememberFor
	// is dropped on arrival.
	CancelRemembered = "remembered"
)

// MaxTieLen is the longest tie identity a server accepts.
const MaxTieLen = 64

// NewTie returns a fresh tie identity: 128 random bits as 26 base32
// characters.
func NewTie() string { return rand.Text() }

// ValidTie reports whether s is a well-formed tie identity: 1 to MaxTieLen
// characters from A-Z, a-z, 0-9 and "-._~" (so it needs no escaping in a URL
// query or a header).
func ValidTie(s string) bool {
	if len(s) == 0 || len(s) > MaxTieLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}
