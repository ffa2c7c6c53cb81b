package latency

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"
)

// FuzzQuantileBound turns arbitrary bytes into samples (4 bytes each, scaled
// by a per-input shift so all magnitudes get explored) and checks the bucket
// bounds of every sample and every quantile against the exact nearest rank.
func FuzzQuantileBound(f *testing.F) {
	f.Add(uint8(0), []byte{1, 2, 3, 4})
	f.Add(uint8(10), []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0x80, 0, 0, 0})
	f.Add(uint8(20), []byte("tail latency at scale"))
	f.Add(uint8(40), []byte{0xff, 0xff, 0xff, 0x7f, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, shift uint8, data []byte) {
		if len(data) < 4 || len(data) > 4*4096 {
			t.Skip()
		}
		sh := uint(shift % 32) // up to 2^32 << 31 < 2^63: well past MaxBounded
		var h Histogram
		vals := make([]int64, 0, len(data)/4)
		for b := data; len(b) >= 4; b = b[4:] {
			v := int64(binary.LittleEndian.Uint32(b)) << sh
			lo, hi := bucketBounds(bucketIndex(v))
			if v < lo || (v >= hi && hi != math.MaxInt64) {
				t.Fatalf("value %d outside its bucket [%d, %d)", v, lo, hi)
			}
			h.Record(time.Duration(v))
			vals = append(vals, v)
		}
		slices.Sort(vals)
		s := h.Snapshot()
		for _, q := range []float64{0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1} {
			want := exactQuantile(vals, q)
			if got := int64(s.Quantile(q)); !withinBound(got, want) {
				t.Fatalf("Quantile(%v) = %d, exact %d", q, got, want)
			}
		}
		if s.Count() != uint64(len(vals)) || int64(s.Min()) != vals[0] || int64(s.Max()) != vals[len(vals)-1] {
			t.Fatalf("count/min/max = %d/%v/%v, want %d/%d/%d",
				s.Count(), s.Min(), s.Max(), len(vals), vals[0], vals[len(vals)-1])
		}
	})
}
