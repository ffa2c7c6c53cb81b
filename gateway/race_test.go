//go:build race

package gateway

// raceEnabled: the race detector is on. Allocation counts then differ
// (sync.Pool drops a share of what it is given, at random, to find
// misuse), so tests of them are skipped.
const raceEnabled = true
