package tiedwire

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValidTie(t *testing.T) {
	for _, s := range []string{"a", "A-b.c_d~9", strings.Repeat("x", MaxTieLen), NewTie()} {
		if !ValidTie(s) {
			t.Errorf("%q refused", s)
		}
	}
	for _, s := range []string{"", " ", "a b", "a/b", "a%20", "a=b", "é", "a\x00", strings.Repeat("x", MaxTieLen+1)} {
		if ValidTie(s) {
			t.Errorf("%q accepted", s)
		}
	}
	if a, b := NewTie(), NewTie(); a == b || len(a) != 26 {
		t.Errorf("NewTie: %q %q", a, b)
	}
}
