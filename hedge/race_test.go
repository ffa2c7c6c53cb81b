//go:build race

package hedge

// raceEnabled: the race detector is on, and every operation costs about
// ten times as much; the largest simulations run smaller.
const raceEnabled = true
