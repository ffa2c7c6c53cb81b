//go:build !race

package gateway

// raceEnabled: see race_test.go.
const raceEnabled = false
