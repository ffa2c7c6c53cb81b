package deadline

import (
	"context"
	"net/http"
	"time"

	"github.com/tailgate-dev/tailgate/internal/jsonerr"
)

// Options configure Handler. The zero value honours every deadline a client
// sends, uncapped, and refuses only requests with no time left.
type Options struct {
	// MinRemaining: a request arriving with less time than this is refused at once (the work cannot
	// finish). Default 0: only a request with no time left (<= 0) is refused. A negative value is
	// the same as 0. It applies to the time the request would get, after Max: with Max below
	// MinRemaining every request carrying the header is refused.
	MinRemaining time.Duration
	// Max caps the deadline a client may ask for; 0 means no cap. A request without the header gets no
	// deadline from this middleware (Max does not apply to it). A negative value is the same as 0.
	// The cap applies first, then MinRemaining: a request gets min(its time, Max), and is refused
	// if that is below MinRemaining.
	Max time.Duration
	// OnRefuse, when non-nil, is told about each refusal (for metrics).
	//
	// It runs on the request's goroutine before the answer is written, so
	// it must not block. remaining is the time the client sent; for a
	// malformed header (400) it is 0, and FromHeader(r.Header) tells that
	// case apart from a client that sent "0n".
	OnRefuse func(r *http.Request, remaining time.Duration)
}

// Handler wraps next: a request carrying Header gets a context deadline now+remaining (capped by Max);
// a malformed header is refused with 400; a request whose remaining time, after the cap, is below
// MinRemaining (or <= 0) is refused with 504 Gateway Timeout and never reaches next. Refusals answer JSON {"error": "..."} that
// says how much time was left and how much is needed.
//
// The deadline only shortens: a context that already ends sooner (the
// server's own timeout, say) keeps its deadline.
func Handler(next http.Handler, opts Options) http.Handler {
	// Copied, so that a caller changing its Options later changes nothing.
	h := &handler{next: next, opts: opts}
	if h.opts.MinRemaining < 0 {
		h.opts.MinRemaining = 0
	}
	if h.opts.Max < 0 {
		h.opts.Max = 0
	}
	return h
}

type handler struct {
	next http.Handler
	opts Options
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	left, ok, err := FromHeader(r.Header)
	if err != nil {
		h.refuse(w, r, http.StatusBadRequest, 0, err.Error())
		return
	}
	if !ok {
		h.next.ServeHTTP(w, r)
		return
	}
	// The cap comes first, so that the floor holds for the time the work
	// actually gets: a request capped below MinRemaining cannot finish.
	allowed := left
	if h.opts.Max > 0 && allowed > h.opts.Max {
		allowed = h.opts.Max
	}
	if floor := h.opts.MinRemaining; allowed <= 0 || allowed < floor {
		need := "more than 0s"
		if floor > 0 {
			need = "at least " + floor.String()
		}
		msg := "deadline: " + left.String() + " left, need " + need
		if allowed != left {
			msg = "deadline: " + left.String() + " left, capped at " + allowed.String() + ", need " + need
		}
		h.refuse(w, r, http.StatusGatewayTimeout, left, msg)
		return
	}
	left = allowed
	// The clock starts on arrival: the time the request spent in transit
	// is not subtracted, since measuring it would need the clocks that the
	// wire format is designed not to trust. MinRemaining is the margin.
	ctx, cancel := context.WithTimeout(r.Context(), left)
	defer cancel()
	h.next.ServeHTTP(w, r.WithContext(ctx))
}

func (h *handler) refuse(w http.ResponseWriter, r *http.Request, code int, left time.Duration, msg string) {
	if h.opts.OnRefuse != nil {
		h.opts.OnRefuse(r, left)
	}
	jsonerr.Write(w, code, msg)
}
