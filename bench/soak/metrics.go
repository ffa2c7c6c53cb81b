package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tailgate-dev/tailgate/bench/internal/promtext"
)

// snapshot is the gateway's size at one moment, from its admin /metrics.
type snapshot struct {
	rss        float64 // process_resident_memory_bytes
	goroutines int     // go_goroutines
	// For the record, in bytes: the heap in use, the heap free but not
	// returned to the OS, stacks, the runtime's own metadata (GC, spans,
	// other), and with a pid, the resident memory backed by the
	// executable's file rather than anonymous.
	heapInuse, heapFree, stacks, runtime float64
	rssFile                              float64
}

// sample measures the gateway from its admin /metrics, and from
// /proc/pid/status if pid is not 0.
func sample(admin string, pid int) (snapshot, error) {
	m, err := promtext.Scrape(admin)
	if err != nil {
		return snapshot{}, err
	}
	rss, ok := m["process_resident_memory_bytes"]
	g, ok2 := m["go_goroutines"]
	if !ok || !ok2 {
		return snapshot{}, fmt.Errorf("%s/metrics lacks process_resident_memory_bytes or go_goroutines", admin)
	}
	s := snapshot{rss: rss, goroutines: int(g), heapInuse: m["go_memstats_heap_inuse_bytes"], stacks: m["go_memstats_stack_inuse_bytes"],
		heapFree: m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"],
		runtime:  m["go_memstats_gc_sys_bytes"] + m["go_memstats_mspan_inuse_bytes"] + m["go_memstats_other_sys_bytes"]}
	if pid != 0 {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) == 3 && f[0] == "RssFile:" {
					kb, _ := strconv.ParseFloat(f[1], 64)
					s.rssFile = kb * 1024
				}
			}
		}
	}
	return s, nil
}

// procRSS reads the resident set size of process pid from /proc.
func procRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

// detail describes s's parts in MB.
func (s snapshot) detail() string {
	d := fmt.Sprintf("heap in use %.1f, heap free but kept %.1f, stacks %.1f, runtime metadata %.1f",
		s.heapInuse/1e6, s.heapFree/1e6, s.stacks/1e6, s.runtime/1e6)
	if s.rssFile > 0 {
		d += fmt.Sprintf(", RSS from the executable's file %.1f", s.rssFile/1e6)
	}
	return d + " (MB)"
}

func (s snapshot) rssMB() float64 { return s.rss / 1e6 }

func (s snapshot) max(o snapshot) snapshot {
	return snapshot{rss: max(s.rss, o.rss), goroutines: max(s.goroutines, o.goroutines)}
}

// within reports whether s is no more than tolerance above start in both
// RSS and goroutines. Ending below the start is fine: it is growth that
// must not stay.
func (s snapshot) within(start snapshot, tolerance float64) bool {
	return s.rss <= start.rss*(1+tolerance) && float64(s.goroutines) <= float64(start.goroutines)*(1+tolerance)
}
