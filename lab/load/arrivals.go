package load

import (
	"math/rand/v2"
	"time"
)

// PointSeed derives the seed of the i-th load's arrivals from the run's
// seed (by SplitMix64), so that loads do not replay one another's gaps
// scaled and the run stays reproducible.
func PointSeed(seed uint64, i int) uint64 {
	z := seed + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// PoissonArrivals returns how many arrivals of Generate's open-loop
// schedule for load (Requests ignored) fall within [0, d): exponential gaps
// cut at d are a Poisson process on [0, d), whose count is random with
// mean load.Rate × d. Generate with that many requests then sends exactly
// those arrivals. It draws the gaps as generateOpen does (same generator,
// stream and arithmetic); TestOverloadArrivalsMatchGenerate holds the two
// together.
func PoissonArrivals(load Config, d time.Duration) int {
	if !(load.Rate > 0) || d <= 0 {
		return 0
	}
	rng := rand.New(rand.NewPCG(load.Seed, 0x6f70656e6c6f6f70)) // generateOpen's stream
	n := 0
	for at := time.Duration(0); ; n++ {
		at += time.Duration(rng.ExpFloat64() / load.Rate * float64(time.Second))
		if at >= d {
			return n
		}
	}
}
