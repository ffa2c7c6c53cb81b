package tied

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"

	"github.com/tailgate-dev/tailgate/hedge"
)

// Headers and paths of the tied-request protocol.
const (
	// TieHeader carries a tied copy's tie identity: an opaque token, the
	// same on both copies of a request, that ValidTie accepts.
	TieHeader = "Tailgate-Tie"

	// PeerHeader carries the base URL of the server that holds the copy's
	// twin ("http://10.0.0.2:8080"). A Server sends cancels only to peers
	// in its ServerConfig.Peers allow-list: a request naming another
	// address is served untied.
	PeerHeader = "Tailgate-Tie-Peer"

	// DroppedHeader marks a Server's answer to a copy it dropped because
	// its twin started elsewhere (status 503). Its value says when:
	// DroppedQueued or DroppedOnArrival. Clients must not take such an
	// answer as the result: the twin's answer is on its way.
	DroppedHeader = "Tailgate-Tie-Dropped"

	// CancelOutcomeHeader is set on the cancel endpoint's 204 answer:
	// CancelDropped, CancelStarted or CancelRemembered.
	CancelOutcomeHeader = "Tailgate-Tie-Cancel"

	// TokenHeader carries ServerConfig.CancelToken on cancel messages.
	TokenHeader = "Tailgate-Tie-Token"

	// DefaultCancelPath is the path of the cancel endpoint that every
	// Server's Handler serves: POST <peer><path>?tie=<id>.
	DefaultCancelPath = "/.well-known/tailgate/tie-cancel"

	// MaxTieLen is the longest tie identity a Server accepts.
	MaxTieLen = 64

	// maxPeerLen bounds the PeerHeader value a Server looks at.
	maxPeerLen = 512
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
	// remembered, and a copy arriving within ServerConfig.RememberFor is
	// dropped on arrival.
	CancelRemembered = "remembered"
)

// ErrInvalid wraps every configuration error returned by NewServer and
// NewTransport.
var ErrInvalid = errors.New("tied: invalid config")

// ErrDropped is the acceptance verdict on an answer dropped for its twin
// (see Accept). It wraps hedge.ErrNotAnAnswer: a dropped copy says
// nothing, so the engine returns the other copy's failure, if any, rather
// than it.
var ErrDropped = fmt.Errorf("tied: copy dropped for its twin: %w", hedge.ErrNotAnAnswer)

// Accept returns an acceptance check for the hedge engine
// (hedge.TransportConfig.Accept) that refuses an answer dropped for its
// twin with ErrDropped, whatever its status, and asks accept (nil means
// hedge.DefaultAccept) about any other.
func Accept(accept func(*http.Response) error) func(*http.Response) error {
	if accept == nil {
		accept = hedge.DefaultAccept
	}
	return func(resp *http.Response) error {
		if Dropped(resp) {
			return ErrDropped
		}
		return accept(resp)
	}
}

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

// Dropped reports whether resp is a Server's answer to a copy it dropped
// because the copy's twin started on another server. Such an answer is
// never the result of a tied request.
func Dropped(resp *http.Response) bool {
	return resp != nil && len(resp.Header[DroppedHeader]) > 0
}
