//go:build !race

package hedge

// raceEnabled: see race_test.go.
const raceEnabled = false
