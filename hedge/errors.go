package hedge

import (
	"errors"

	"github.com/tailgate-dev/tailgate/internal/upgrade"
)

// Sentinel errors that callers branch on with errors.Is.
var (
	// ErrResponseTooLarge is returned by the Transport for an attempt whose
	// response body exceeds the configured limit.
	ErrResponseTooLarge = errors.New("hedge: response body too large")

	// ErrUnexpectedUpgrade is an attempt's error when its server switched
	// protocols (101) although the request asked for no upgrade. Such a
	// response is no answer to a read, and its body would be the raw
	// connection: the Transport closes it at once, before any read.
	ErrUnexpectedUpgrade = upgrade.ErrUnexpected

	// ErrRedirectRefused is returned by clients built with NewClient when a
	// server answers with a redirect: a hedged read must not wander to an
	// address the caller did not configure.
	ErrRedirectRefused = errors.New("hedge: redirect refused")

	// ErrNotAccepted wraps the verdict of the acceptance check when no attempt
	// produced an acceptable result.
	ErrNotAccepted = errors.New("hedge: no acceptable result")

	// ErrNotAnAnswer, wrapped by an acceptance verdict, says the refused
	// result carries no answer at all (a tied copy that its server
	// dropped for its twin, say): when nothing wins, any later refused
	// result or error is returned instead of it, and it never displaces
	// one. Only when every attempt ended so is it returned.
	ErrNotAnAnswer = errors.New("hedge: not an answer")

	// ErrInvalid wraps every configuration error returned by New,
	// NewBudget, NewTransport and ParseDelay.
	ErrInvalid = errors.New("hedge: invalid policy")
)
