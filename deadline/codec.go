package deadline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Header carries the remaining time.
const Header = "Tailgate-Timeout"

// ErrMalformed is wrapped by every error about a value of Header that is not
// in the wire format: Parse's and FromHeader's, and so the 400 of Handler.
var ErrMalformed = errors.New("deadline: malformed timeout")

// MaxDigits is the most digits a value may have, as in gRPC's grpc-timeout:
// a value with its unit fits in 9 bytes, and any time.Duration fits (in
// hours) losing less than one unit.
const MaxDigits = 8

// maxValue is the largest number MaxDigits digits can write.
const maxValue = 99_999_999

// units are the wire units from finest to coarsest: Format takes the first
// one in which the duration fits.
var units = [...]struct {
	letter byte
	d      time.Duration
}{
	{'n', time.Nanosecond},
	{'u', time.Microsecond},
	{'m', time.Millisecond},
	{'S', time.Second},
	{'M', time.Minute},
	{'H', time.Hour},
}

// Unit returns the duration of a wire unit letter, and false if the letter
// is not one (the letters are case-sensitive: "m" is a millisecond and "M"
// a minute).
func Unit(letter byte) (time.Duration, bool) {
	for _, u := range units {
		if u.letter == letter {
			return u.d, true
		}
	}
	return 0, false
}

// Format encodes d as 1 to 8 ASCII digits and a unit: H (hours), M (minutes), S (seconds), m (milliseconds),
// u (microseconds), n (nanoseconds). It uses the finest unit whose value fits in 8 digits and truncates
// (so the receiver never gets more time than there is). d <= 0 encodes as "0n".
func Format(d time.Duration) string {
	if d <= 0 {
		return "0n"
	}
	// Hours hold any Duration: math.MaxInt64 nanoseconds is 2562047h.
	u := units[len(units)-1]
	for _, c := range units[:len(units)-1] {
		if d/c.d <= maxValue {
			u = c
			break
		}
	}
	// Integer division truncates: rounding up could hand the receiver time
	// the sender does not have.
	var buf [MaxDigits + 1]byte
	b := strconv.AppendInt(buf[:0], int64(d/u.d), 10)
	return string(append(b, u.letter))
}

// Parse decodes a value written by Format (strictly: 1-8 digits, no sign, no spaces, one unit letter;
// leading zeros allowed). Errors wrap ErrMalformed and quote the input.
//
// From 2562048 hours up, a value exceeds time.Duration's range; it parses
// to the longest Duration (about 292 years), as gRPC does, since a bound
// that far away is no bound at all. An error quotes at most the first 32
// bytes of the input: the input comes from a client, and Handler sends the
// error back to it.
func Parse(s string) (time.Duration, error) {
	// Lengths are in bytes: a non-ASCII digit such as "٥" is two bytes,
	// neither of them '0'-'9', so it fails below as it should.
	n := len(s) - 1 // digits before the unit
	switch {
	case len(s) == 0:
		return 0, malformed(s, "empty")
	case n == 0:
		return 0, malformed(s, "no digits before the unit")
	case n > MaxDigits:
		return 0, malformed(s, "more than 8 digits")
	}
	unit, ok := Unit(s[n])
	if !ok {
		return 0, malformed(s, fmt.Sprintf("unit %q is not one of H, M, S, m, u, n", s[n]))
	}
	var v int64
	for i := range n {
		c := s[i]
		if c < '0' || c > '9' {
			// Signs, spaces, hex prefixes and non-ASCII digits all end
			// here: strconv.ParseInt would accept a sign.
			return 0, malformed(s, fmt.Sprintf("byte %d is not an ASCII digit", i))
		}
		v = v*10 + int64(c-'0')
	}
	if v > math.MaxInt64/int64(unit) {
		return math.MaxInt64, nil
	}
	return time.Duration(v) * unit, nil
}

// maxQuoted bounds how much of a malformed value an error repeats: the
// value comes from a client, and Handler sends the error back to it.
const maxQuoted = 32

func malformed(s, why string) error {
	if len(s) > maxQuoted {
		s = s[:maxQuoted] + "..."
	}
	return fmt.Errorf("%w %q: %s", ErrMalformed, s, why)
}

// FromHeader reads the header from h: ok is false when absent; an error when present but malformed
// (or when there are several values).
//
// ok is true whenever the header is present, malformed or not; on error d
// is 0. An empty value is present and malformed.
func FromHeader(h http.Header) (d time.Duration, ok bool, err error) {
	vs := h[Header]
	switch len(vs) {
	case 0:
		return 0, false, nil
	case 1:
		d, err = Parse(vs[0])
		return d, true, err
	default:
		// Two deadlines cannot both be honoured, and picking one would
		// let whichever hop added the second override the first.
		return 0, true, fmt.Errorf("%w: %d %s values, want 1", ErrMalformed, len(vs), Header)
	}
}

// Remaining reports the time left on ctx's deadline and whether it has one.
// The time left is zero or negative once the deadline has passed.
func Remaining(ctx context.Context) (time.Duration, bool) {
	return RemainingAt(ctx, time.Now())
}

// RemainingAt is Remaining as of now, for callers that already read the
// clock or want a fixed one.
func RemainingAt(ctx context.Context, now time.Time) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return dl.Sub(now), true
}
