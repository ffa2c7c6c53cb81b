package exp

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// Stolen returns the CPU time the hypervisor has taken from this machine's
// CPUs since boot (the steal column of Linux's /proc/stat, summed over the
// CPUs), and false where it cannot be read. On a shared virtual machine it
// is what moves a tail latency most from one run to the next, so a report
// records how much was stolen while it ran (Environment.StolenMs).
func Stolen() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	return parseStolen(string(b))
}

// parseStolen reads the steal column of /proc/stat's first line, in
// ticks of 10ms (USER_HZ is 100 on Linux whatever the kernel's HZ).
func parseStolen(stat string) (time.Duration, bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	ticks, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil || ticks < 0 {
		return 0, false
	}
	return time.Duration(ticks) * 10 * time.Millisecond, true
}
