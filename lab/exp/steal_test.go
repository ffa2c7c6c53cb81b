package exp

import (
	"testing"
	"time"
)

func TestParseStolen(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want time.Duration
		ok   bool
	}{
		{"cpu  2545128 7684 560538 4192801 15814 0 94124 265511 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n", 2655110 * time.Millisecond, true},
		{"cpu  1 2 3 4 5 6 7 42\n", 420 * time.Millisecond, true},
		{"cpu  1 2 3 4 5 6 7\n", 0, false},     // a kernel before steal was counted
		{"cpu0 1 2 3 4 5 6 7 8 9\n", 0, false}, // not the summary line
		{"cpu  1 2 3 4 5 6 7 x\n", 0, false},
		{"", 0, false},
	} {
		got, ok := parseStolen(tc.stat)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseStolen(%q) = %v, %v; want %v, %v", tc.stat, got, ok, tc.want, tc.ok)
		}
	}
}
