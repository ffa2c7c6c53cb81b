package tied

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
)

// The cancel endpoint's default path; the protocol's headers and their
// values are in the package doc and docs/library.md.
const (
	// DefaultCancelPath is the path of the cancel endpoint that every
	// Server's Handler serves: POST <peer><path>?tie=<id>.
	DefaultCancelPath = "/.well-known/tailgate/tie-cancel"

	// maxPeerLen bounds the peer header's value a Server looks at.
	maxPeerLen = 512
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

// Dropped reports whether resp is a Server's answer to a copy it dropped
// because the copy's twin started on another server. Such an answer is
// never the result of a tied request.
func Dropped(resp *http.Response) bool {
	return resp != nil && len(resp.Header[tiedwire.DroppedHeader]) > 0
}
