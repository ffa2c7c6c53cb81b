package exp

import (
	"testing"
	"time"
)

// A meter stopped says how late its wake-ups were, never less than
// nothing, and its goroutine ends with Stop (the package's leak check).
func TestStallMeterStops(t *testing.T) {
	m := StartStallMeter()
	time.Sleep(5 * StallTick)
	if d := m.Stop(); d < 0 {
		t.Errorf("stall %v", d)
	}
}
