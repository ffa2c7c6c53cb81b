package partition

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalid wraps every error New and SetReplicas return for bad input.
var ErrInvalid = errors.New("partition: invalid configuration")

// Defaults of a Config.
const (
	DefaultPartitionsPerReplica = 20
	DefaultOwners               = 2
	DefaultLoadBound            = 1.25
	DefaultMovesPerRound        = 2
	DefaultCooldown             = 5 * time.Second
	DefaultWindow               = 10 * time.Second
	DefaultHotKeys              = 16
	DefaultHotShare             = 0.25
	DefaultHotReplicas          = 4
	DefaultSketchSize           = 256
)

// Limits: New and SetReplicas refuse anything larger.
const (
	MaxPartitions  = 1 << 20 // partitions in a Table (PartitionsPerReplica × initial replicas)
	MaxReplicas    = 1 << 16 // replicas in a Table at any time
	MaxOwners      = 16      // Owners
	MaxHotReplicas = 64      // HotReplicas
	MaxHotKeys     = 1024    // HotKeys
	MaxSketchSize  = 1 << 16 // SketchSize
)

// Config configures a Table. The zero Config is useful: 20 partitions per
// initial replica, 2 owners each, a 1.25 load bound with at most 2 moves per
// round 5 s apart, a 10 s window, and up to 16 hot keys spread over 4
// replicas each.
type Config struct {
	// PartitionsPerReplica sets the partition count P: this times the number
	// of replicas New is given, fixed for the Table's life (keys never
	// change partition). Default 20; zero means the default, negative is an
	// error.
	PartitionsPerReplica int

	// Owners is R, the replicas that own each partition: the first, its
	// home, takes a key's primaries, the others its hedges. Default 2; zero
	// means the default, negative or
	// above MaxOwners is an error. With fewer than R replicas every replica
	// owns every partition.
	Owners int

	// LoadBound: a replica whose load (the reads of the partitions it is the
	// home of, and its share of the hot keys') exceeds LoadBound × the mean
	// load hands homes to others, and no move may push a receiver above it.
	// Default 1.25 (as HAProxy's hash-balance-factor 125); zero means the
	// default; it must be above 1.
	LoadBound float64

	// MovesPerRound caps the partition moves of one rebalancing round.
	// Default 2; zero means the default, negative turns rebalancing off
	// (partitions stay where rendezvous hashing puts them).
	MovesPerRound int

	// Cooldown is the minimum time between two rounds that move partitions,
	// so that the load window sees the effect of a move before the next.
	// Default 5 s; zero means the default, negative is an error.
	Cooldown time.Duration

	// Window is the time constant of the decaying load estimates (per
	// partition, per replica, per key in the hot-key sketch): a request
	// Window old weighs 1/e of a fresh one. The rebalancer also waits one
	// Window after its first round before it moves anything. Default 10 s;
	// zero means the default, negative is an error.
	Window time.Duration

	// HotKeys is H, the most keys replicated beyond their partition's owners
	// at once. Default 16; zero means the default, negative turns hot-key
	// detection and replication off (and RecordAt skips the sketch).
	HotKeys int

	// HotShare: a key becomes hot when its rate exceeds HotShare × the mean
	// rate per replica and its partition's home is over LoadBound (each
	// extra replica misses it once: worth it only where the home needs
	// the help), and cools down when it falls below half of that rate.
	// Default 0.25; zero means the default, negative is an error.
	HotShare float64

	// HotReplicas is K, the replicas a hot key's reads spread over: its
	// partition's owners first, then the next by the key's own rendezvous
	// order (never fewer than the owners, never more than the replicas).
	// Default 4; zero means the default, negative or above MaxHotReplicas is
	// an error.
	HotReplicas int

	// SketchSize is the number of Space-Saving counters of the hot-key
	// sketch: its memory bound. Default 256; zero means the default,
	// negative, above MaxSketchSize or below HotKeys is an error.
	SketchSize int
}

// withDefaults returns c with zero fields replaced by defaults, or an error
// naming the first invalid field.
func (c Config) withDefaults() (Config, error) {
	ints := []struct {
		name string
		v    *int
		def  int
		max  int
	}{
		{"PartitionsPerReplica", &c.PartitionsPerReplica, DefaultPartitionsPerReplica, MaxPartitions},
		{"Owners", &c.Owners, DefaultOwners, MaxOwners},
		{"HotReplicas", &c.HotReplicas, DefaultHotReplicas, MaxHotReplicas},
		{"SketchSize", &c.SketchSize, DefaultSketchSize, MaxSketchSize},
	}
	for _, f := range ints {
		switch {
		case *f.v < 0:
			return c, fmt.Errorf("%w: %s %d is negative", ErrInvalid, f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		case *f.v > f.max:
			return c, fmt.Errorf("%w: %s %d above the limit %d", ErrInvalid, f.name, *f.v, f.max)
		}
	}
	if c.MovesPerRound == 0 {
		c.MovesPerRound = DefaultMovesPerRound
	}
	if c.HotKeys == 0 {
		c.HotKeys = DefaultHotKeys
	}
	if c.HotKeys > MaxHotKeys {
		return c, fmt.Errorf("%w: HotKeys %d above the limit %d", ErrInvalid, c.HotKeys, MaxHotKeys)
	}
	if c.HotKeys > c.SketchSize {
		return c, fmt.Errorf("%w: SketchSize %d below HotKeys %d", ErrInvalid, c.SketchSize, c.HotKeys)
	}
	durs := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Cooldown", &c.Cooldown, DefaultCooldown},
		{"Window", &c.Window, DefaultWindow},
	}
	for _, f := range durs {
		if *f.v < 0 {
			return c, fmt.Errorf("%w: %s %v is negative", ErrInvalid, f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if c.LoadBound == 0 {
		c.LoadBound = DefaultLoadBound
	}
	if !(c.LoadBound > 1) || math.IsInf(c.LoadBound, 0) {
		return c, fmt.Errorf("%w: LoadBound %v must be above 1 and finite", ErrInvalid, c.LoadBound)
	}
	if c.HotShare == 0 {
		c.HotShare = DefaultHotShare
	}
	if !(c.HotShare > 0) || math.IsInf(c.HotShare, 0) {
		return c, fmt.Errorf("%w: HotShare %v must be positive and finite", ErrInvalid, c.HotShare)
	}
	return c, nil
}

// checkNames refuses a replica list that cannot name owners: empty, too
// long, or with an empty or repeated name.
func checkNames(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("%w: no replicas", ErrInvalid)
	}
	if len(names) > MaxReplicas {
		return fmt.Errorf("%w: %d replicas above the limit %d", ErrInvalid, len(names), MaxReplicas)
	}
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if n == "" {
			return fmt.Errorf("%w: replica %d has an empty name", ErrInvalid, i)
		}
		if seen[n] {
			return fmt.Errorf("%w: replica %q named twice", ErrInvalid, n)
		}
		seen[n] = true
	}
	return nil
}

// errf returns an error wrapping ErrInvalid.
func errf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
