package deadline_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"0n", "250m", "2S", "1M", "3H", "7u", "99999999n", "00000005m", "99999999H", "2562048H",
		"", "5", "m", "-5m", "+5m", "123456789m", "5 m", "5x", "5mm", "٥m", "0x5m",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := deadline.Parse(s)
		if err != nil {
			if !errors.Is(err, deadline.ErrMalformed) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrMalformed", s, err)
			}
			return
		}
		if len(s) < 2 || len(s) > deadline.MaxDigits+1 || d < 0 {
			t.Fatalf("Parse(%q) = %v accepted", s, d)
		}
		again := deadline.Format(d)
		d2, err := deadline.Parse(again)
		if err != nil {
			t.Fatalf("Parse(%q) = %v; Parse(Format = %q): %v", s, d, again, err)
		}
		if d2 > d {
			t.Fatalf("Parse(%q) = %v; re-encoded %q = %v: more", s, d, again, d2)
		}
		if d > 0 && d-d2 >= unitOf(t, again) {
			t.Fatalf("Parse(%q) = %v; re-encoded %q = %v: lost a unit or more", s, d, again, d2)
		}
		if deadline.Format(d2) != again {
			t.Fatalf("Format is not stable: %q, then %q", again, deadline.Format(d2))
		}
	})
}

func FuzzFormat(f *testing.F) {
	for _, n := range []int64{0, -1, 1, 99_999_999, 100_000_000, int64(time.Hour), math.MaxInt64, math.MinInt64} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := time.Duration(n)
		if d <= 0 {
			if s := deadline.Format(d); s != "0n" {
				t.Fatalf("Format(%d) = %q, want 0n", d, s)
			}
			return
		}
		checkRoundTrip(t, d)
	})
}
