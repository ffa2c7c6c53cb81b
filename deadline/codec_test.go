package deadline_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
)

// unitOf returns the unit of an encoded value, failing the test if it has
// none.
func unitOf(t testing.TB, s string) time.Duration {
	t.Helper()
	if s == "" {
		t.Fatalf("empty encoding")
	}
	u, ok := deadline.Unit(s[len(s)-1])
	if !ok {
		t.Fatalf("encoding %q ends in no unit", s)
	}
	return u
}

// finer maps each unit to the next finer one.
var finer = map[time.Duration]time.Duration{
	time.Microsecond: time.Nanosecond,
	time.Millisecond: time.Microsecond,
	time.Second:      time.Millisecond,
	time.Minute:      time.Second,
	time.Hour:        time.Minute,
}

// checkRoundTrip checks the codec's promises for one positive duration:
// the encoding is well formed, uses the finest unit that fits, and decodes
// to at most d and less than one unit below it.
func checkRoundTrip(t testing.TB, d time.Duration) {
	t.Helper()
	s := deadline.Format(d)
	if n := len(s); n < 2 || n > deadline.MaxDigits+1 {
		t.Fatalf("Format(%d) = %q: length %d", d, s, n)
	}
	u := unitOf(t, s)
	got, err := deadline.Parse(s)
	if err != nil {
		t.Fatalf("Parse(Format(%d) = %q): %v", d, s, err)
	}
	if got > d {
		t.Fatalf("Parse(Format(%d) = %q) = %d: more time than there is", d, s, got)
	}
	if d-got >= u {
		t.Fatalf("Parse(Format(%d) = %q) = %d: lost %v, a unit or more", d, s, got, d-got)
	}
	if d%u == 0 && got != d {
		t.Fatalf("Parse(Format(%d) = %q) = %d: want exact", d, s, got)
	}
	if f, ok := finer[u]; ok && d/f <= 99_999_999 {
		t.Fatalf("Format(%d) = %q: fits in 8 digits of %v", d, s, f)
	}
}

func TestRoundTripMany(t *testing.T) {
	var ds []time.Duration
	for _, base := range []time.Duration{1, 7, 999, 1000, 1001, 123456789} {
		for p := time.Duration(1); p > 0 && p <= math.MaxInt64/base; p *= 10 {
			ds = append(ds, base*p, base*p-1, base*p+1)
		}
	}
	for _, u := range []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour} {
		ds = append(ds, u, 99_999_999*u, 100_000_000*u, 99_999_999*u+u-1)
	}
	ds = append(ds, math.MaxInt64, math.MaxInt64-1, math.MaxInt64/2)
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		// Spread over magnitudes, not uniformly (which is nearly all hours).
		ds = append(ds, time.Duration(r.Int64N(math.MaxInt64)>>r.IntN(63)))
	}
	for _, d := range ds {
		if d > 0 {
			checkRoundTrip(t, d)
		}
	}
}

func TestRoundTripExactWhenItFits(t *testing.T) {
	for _, d := range []time.Duration{
		1, 99_999_999, // every nanosecond count below 100ms
		250 * time.Millisecond, 2 * time.Second, 90 * time.Second,
		100 * time.Second, 36 * time.Hour, 99_999_999 * time.Minute, 2_562_047 * time.Hour,
	} {
		got, err := deadline.Parse(deadline.Format(d))
		if err != nil || got != d {
			t.Errorf("Parse(Format(%v) = %q) = %v, %v; want exact", d, deadline.Format(d), got, err)
		}
	}
}

func TestFormatUnitChoice(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{1, "1n"},
		{99_999_999, "99999999n"},
		{100_000_000, "100000u"}, // 100ms: 9 digits of ns
		{100_000_999, "100000u"}, // truncated, not rounded
		{250 * time.Millisecond, "250000u"},
		{1500 * time.Millisecond, "1500000u"},
		{99_999_999 * time.Microsecond, "99999999u"},
		{100 * time.Second, "100000m"},
		{99_999_999 * time.Millisecond, "99999999m"},
		{100_000 * time.Second, "100000S"},
		{99_999_999*time.Second + 999*time.Millisecond, "99999999S"},
		{100_000_000 * time.Second, "1666666M"},
		{99_999_999 * time.Minute, "99999999M"},
		{100_000_000 * time.Minute, "1666666H"},
		{math.MaxInt64, "2562047H"},
	} {
		if got := deadline.Format(tc.d); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestFormatNoTime(t *testing.T) {
	for _, d := range []time.Duration{0, -1, -time.Hour, math.MinInt64} {
		if got := deadline.Format(d); got != "0n" {
			t.Errorf("Format(%v) = %q, want 0n", d, got)
		}
	}
}

func TestParseValid(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"0n", 0},
		{"0H", 0},
		{"250m", 250 * time.Millisecond},
		{"2S", 2 * time.Second},
		{"1M", time.Minute},
		{"3H", 3 * time.Hour},
		{"7u", 7 * time.Microsecond},
		{"99999999n", 99_999_999},
		{"00000005m", 5 * time.Millisecond},
		{"00000000n", 0},
		{"90S", 90 * time.Second},
		{"2562047H", 2_562_047 * time.Hour},
		{"99999999M", 99_999_999 * time.Minute},
		// Beyond time.Duration: the longest Duration, as gRPC does.
		{"2562048H", math.MaxInt64},
		{"99999999H", math.MaxInt64},
	} {
		got, err := deadline.Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseMalformed(t *testing.T) {
	for _, in := range []string{
		"", "5", "m", "n", "-5m", "+5m", "-0n", "123456789m", "000000005m",
		"5 m", " 5m", "5m ", "5\tm", "5m\n", "5x", "5h", "5s", "5N", "5U", "5mm", "5M5S",
		"٥m", "５m", "0x5m", "0b1S", "1.5S", "1e3m", "1_000m", "5\x00", "\x005m", "5µ",
		"5ms", "inf", "NaNn",
	} {
		d, err := deadline.Parse(in)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, d)
			continue
		}
		if !errors.Is(err, deadline.ErrMalformed) {
			t.Errorf("Parse(%q) error %v does not wrap ErrMalformed", in, err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "deadline: ") || !strings.Contains(msg, strconv.Quote(in)) {
			t.Errorf("Parse(%q) error %q: want the deadline: prefix and the quoted input", in, msg)
		}
		if d != 0 {
			t.Errorf("Parse(%q) = %v with an error, want 0", in, d)
		}
	}
}

func TestParseMalformedLongInputIsQuotedShort(t *testing.T) {
	in := strings.Repeat("9", 10000) + "m"
	_, err := deadline.Parse(in)
	if !errors.Is(err, deadline.ErrMalformed) {
		t.Fatalf("Parse(long) error %v, want ErrMalformed", err)
	}
	if msg := err.Error(); len(msg) > 200 || !strings.Contains(msg, `"99999999`) {
		t.Errorf("error for a 10001-byte value is %d bytes: %.80q", len(msg), msg)
	}
}

func TestUnit(t *testing.T) {
	for letter, want := range map[byte]time.Duration{
		'H': time.Hour, 'M': time.Minute, 'S': time.Second,
		'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond,
	} {
		if got, ok := deadline.Unit(letter); !ok || got != want {
			t.Errorf("Unit(%q) = %v, %v; want %v", letter, got, ok, want)
		}
	}
	for _, letter := range []byte("hsUNx0 ") {
		if got, ok := deadline.Unit(letter); ok {
			t.Errorf("Unit(%q) = %v, want none", letter, got)
		}
	}
}

func TestFromHeader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h       http.Header
		want    time.Duration
		ok      bool
		wantErr bool
	}{
		{"nil header", nil, 0, false, false},
		{"absent", http.Header{"Other": {"1S"}}, 0, false, false},
		{"present", http.Header{deadline.Header: {"250m"}}, 250 * time.Millisecond, true, false},
		{"zero", http.Header{deadline.Header: {"0n"}}, 0, true, false},
		{"empty value", http.Header{deadline.Header: {""}}, 0, true, true},
		{"malformed", http.Header{deadline.Header: {"5 s"}}, 0, true, true},
		{"several values", http.Header{deadline.Header: {"1S", "1S"}}, 0, true, true},
		{"joined values", http.Header{deadline.Header: {"1S, 2S"}}, 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok, err := deadline.FromHeader(tc.h)
			if d != tc.want || ok != tc.ok || (err != nil) != tc.wantErr {
				t.Fatalf("FromHeader = %v, %v, %v; want %v, %v, error %v", d, ok, err, tc.want, tc.ok, tc.wantErr)
			}
			if err != nil && !errors.Is(err, deadline.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
		})
	}
}

func TestFromHeaderSeveralValuesSaysSo(t *testing.T) {
	h := http.Header{}
	h.Add(deadline.Header, "1S")
	h.Add(deadline.Header, "2S")
	_, _, err := deadline.FromHeader(h)
	if err == nil || !strings.Contains(err.Error(), "2 Tailgate-Timeout values") {
		t.Fatalf("FromHeader with two values: %v", err)
	}
}

func BenchmarkFormat(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		deadline.Format(1234567 * time.Microsecond)
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := deadline.Parse("1234567u"); err != nil {
			b.Fatal(err)
		}
	}
}
