package tied

import (
	"context"
	"crypto/subtle"
	"io"
	"net/http"

	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/internal/upgrade"
)

// sendCancel tells the peer whose cancel URL (up to the tie) is u that tie's
// copy has started here, from a goroutine of its own: the request that
// started goes on at once whatever becomes of the message. At most
// MaxCancelsInFlight messages are out at once, each bounded by
// CancelTimeout; one that cannot be sent or fails is counted and dropped.
func (s *Server) sendCancel(tie, u string) {
	if s.inflight.Add(1) > s.maxCancels {
		s.inflight.Add(-1)
		s.c.cancelsFailed.Add(1)
		return
	}
	s.cmu.Lock()
	if s.closed {
		s.cmu.Unlock()
		s.inflight.Add(-1)
		s.c.cancelsFailed.Add(1)
		return
	}
	s.wg.Add(1)
	s.cmu.Unlock()
	go func() {
		defer s.wg.Done()
		defer s.inflight.Add(-1)
		if s.deliver(tie, u) {
			s.c.cancelsSent.Add(1)
		} else {
			s.c.cancelsFailed.Add(1)
		}
	}()
}

// deliver sends one cancel message and reports whether the peer
// acknowledged it.
func (s *Server) deliver(tie, u string) bool {
	ctx, cancel := context.WithTimeout(s.baseCtx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u+tie, nil)
	if err != nil {
		return false
	}
	if s.token != "" {
		req.Header.Set(tiedwire.TokenHeader, s.token)
	}
	resp, err := s.cancelRT.RoundTrip(req)
	if err != nil {
		return false
	}
	// A 101 hands over the raw connection, which the request's context no
	// longer bounds: reading it would last until the peer closes.
	if upgrade.RefuseStray(req, resp) != nil {
		return false
	}
	// A little of the body is read so the connection may be reused.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// tokenOK reports whether the token header values hold exactly want, in
// constant time for a value of the right length.
func tokenOK(got []string, want string) bool {
	return len(got) == 1 && subtle.ConstantTimeCompare([]byte(got[0]), []byte(want)) == 1
}
