package replica

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestNewRejectsInvalidConfiguration(t *testing.T) {
	ok := []string{"a", "b"}
	for _, tc := range []struct {
		name  string
		names []string
		cfg   Config
		want  string
	}{
		{"no names", nil, Config{}, "no replicas"},
		{"empty names", []string{}, Config{}, "no replicas"},
		{"empty name", []string{"a", ""}, Config{}, "empty name"},
		{"duplicate", []string{"a", "b", "a"}, Config{}, `both named "a"`},
		{"duplicate with a password", []string{"http://u:s3cret@a", "http://u:s3cret@a"}, Config{}, `both named "http://xxxxx@a"`},
		{"negative threshold", ok, Config{FailureThreshold: -1}, "failure threshold"},
		{"negative cooldown", ok, Config{Cooldown: -time.Second}, "negative cooldown"},
		{"negative max cooldown", ok, Config{MaxCooldown: -time.Second}, "negative max cooldown"},
		{"max below cooldown", ok, Config{Cooldown: 10 * time.Second, MaxCooldown: time.Second}, "shorter than cooldown"},
		{"negative decay", ok, Config{DecayTime: -time.Second}, "negative decay"},
		{"probation factor 1", ok, Config{Probation: Probation{Factor: 1}}, "probation factor 1 must be above 1"},
		{"probation factor NaN", ok, Config{Probation: Probation{Factor: math.NaN()}}, "probation factor"},
		{"probation factor negative", ok, Config{Probation: Probation{Factor: -3}}, "probation factor"},
		{"exit factor above factor", ok, Config{Probation: Probation{Factor: 3, ExitFactor: 4}}, "exit factor 4 must be within [1, factor 3]"},
		{"exit factor below 1", ok, Config{Probation: Probation{ExitFactor: 0.5}}, "exit factor"},
		{"exit factor above default factor", ok, Config{Probation: Probation{ExitFactor: 3.5}}, "exit factor"},
		{"negative window", ok, Config{Probation: Probation{Window: -time.Second}}, "negative probation window"},
		{"negative min samples", ok, Config{Probation: Probation{MinSamples: -1}}, "min samples"},
		{"too many min samples", ok, Config{Probation: Probation{MinSamples: MaxProbationSamples + 1}}, "min samples 65 must be within [1, 64]"},
		{"max share above 1", ok, Config{Probation: Probation{MaxShare: 1.5}}, "max share 1.5 must be within (0, 1]"},
		{"negative max share", ok, Config{Probation: Probation{MaxShare: -0.1}}, "max share"},
		{"infinite shadow rate", ok, Config{Probation: Probation{ShadowRate: math.Inf(1)}}, "shadow rate"},
		{"negative shadow rate", ok, Config{Probation: Probation{ShadowRate: -1}}, "shadow rate -1 must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.names, tc.cfg)
			if s != nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("New = %v, %v; want ErrInvalid", s, err)
			}
			if !strings.HasPrefix(err.Error(), "replica: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want prefix \"replica: \" and %q", err, tc.want)
			}
		})
	}
}

func TestNewFillsDefaults(t *testing.T) {
	s, err := New([]string{"a"}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{FailureThreshold: 5, Cooldown: 5 * time.Second, MaxCooldown: time.Minute, DecayTime: 10 * time.Second,
		// Filled in even while off, so that Config shows what turning it on
		// would mean.
		Probation: Probation{Factor: 3, MinExcess: 2 * time.Millisecond, ExitFactor: 2, Window: 5 * time.Second, MinSamples: 5, MaxShare: 0.1, ShadowRate: 1}}
	if got := s.Config(); !reflect.DeepEqual(got, want) {
		t.Errorf("Config() = %+v, want %+v", got, want)
	}
	// A long cooldown with the default cap: the cap follows it rather than
	// making the zero MaxCooldown an error.
	s, err = New([]string{"a"}, Config{Cooldown: 2 * time.Minute, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Config(); got.MaxCooldown != 2*time.Minute || got.Seed != 7 {
		t.Errorf("Config() = %+v, want MaxCooldown 2m and Seed 7", got)
	}
	// The exit factor follows the factor, but never below 1.
	for factor, exit := range map[float64]float64{6: 4, 1.2: 1} {
		s, err = New([]string{"a"}, Config{Probation: Probation{Enabled: true, Factor: factor}})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Config().Probation.ExitFactor; got != exit {
			t.Errorf("factor %v: exit factor %v, want %v", factor, got, exit)
		}
	}
}

func TestNamesAndIndexes(t *testing.T) {
	s := mustNew(t, 3, Config{})
	if s.Len() != 3 {
		t.Fatalf("Len = %d", s.Len())
	}
	for i := range 3 {
		n := s.Name(i)
		if n != names(3)[i] {
			t.Errorf("Name(%d) = %q", i, n)
		}
		if j, ok := s.Index(n); !ok || j != i {
			t.Errorf("Index(%q) = %d, %v", n, j, ok)
		}
	}
	if j, ok := s.Index("nope"); ok || j != -1 {
		t.Errorf("Index(nope) = %d, %v", j, ok)
	}
}

func TestReplicaIsPaddedToCacheLines(t *testing.T) {
	// A replica's groups of fields, and neighbouring replicas, must not
	// share a cache line (see replica): whole lines, three for the groups
	// picks and Done touch, and probation's samples after them.
	if sz := unsafeSizeofReplica(); sz%cacheLine != 0 || sz < 3*cacheLine+unsafe.Sizeof(samples{}) {
		t.Errorf("sizeof(replica) = %d, want whole cache lines", sz)
	}
}
