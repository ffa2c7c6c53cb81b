package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// gcjoin puts the reads of one target (tail -dump) beside the garbage
// collections of the process that served them, and says how the reads
// that overlapped a collection fared against the others, and how many of
// the slowest reads overlapped one:
//
//	tail gcjoin -reads reads.txt -target tailgate-off -cycles cycles.txt -gctrace gw.log
//
// cycles.txt is bench/proxies' /debug/gc/cycles (each collection's end,
// wall clock) and gw.log the process's GODEBUG=gctrace=1 output (how long
// each ran: its two stop-the-world pauses and its concurrent mark).
func gcjoin(args []string) {
	fs := flag.NewFlagSet("gcjoin", flag.ExitOnError)
	readsFile := fs.String("reads", "", "tail -dump's file")
	target := fs.String("target", "", "the target whose reads to look at")
	run := fs.Int("run", 0, "only this run's reads (0: all)")
	cyclesFile := fs.String("cycles", "", "/debug/gc/cycles of the target's process")
	traceFile := fs.String("gctrace", "", "the target's GODEBUG=gctrace=1 output")
	fs.Parse(args)

	// Each collection: [start, end], its first pause [start, start+stw1],
	// its last [end-stw2, end].
	type cycle struct{ start, end, stw1, stw2 int64 }
	ends := map[int]int64{}
	for _, f := range lines(*cyclesFile) {
		if len(f) == 6 && f[0] == "gc" {
			n, _ := strconv.Atoi(f[1])
			ends[n], _ = strconv.ParseInt(f[3], 10, 64)
		}
	}
	var cycles []cycle
	for _, f := range lines(*traceFile) {
		// gc 14 @6.031s 0%: 0.55+4.1+0.049 ms clock, ...
		if len(f) < 7 || f[0] != "gc" || f[6] != "clock," {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		end, ok := ends[n]
		if !ok {
			continue
		}
		var ms [3]float64
		for i, p := range strings.Split(f[4], "+") {
			if i < 3 {
				ms[i], _ = strconv.ParseFloat(p, 64)
			}
		}
		total := int64((ms[0] + ms[1] + ms[2]) * 1e6)
		cycles = append(cycles, cycle{start: end - total, end: end, stw1: int64(ms[0] * 1e6), stw2: int64(ms[2] * 1e6)})
	}
	if len(cycles) == 0 {
		log.Fatal("gcjoin: no collection found in both files")
	}

	type read struct {
		lat       time.Duration
		gc, pause bool // overlapped a collection; one of its pauses
	}
	var reads []read
	var first, last int64
	for _, f := range lines(*readsFile) {
		if len(f) != 6 || f[0] != *target || f[5] != "true" || *run > 0 && f[2] != strconv.Itoa(*run) {
			continue
		}
		at, _ := strconv.ParseInt(f[3], 10, 64)
		lat, _ := strconv.ParseInt(f[4], 10, 64)
		r := read{lat: time.Duration(lat)}
		for _, c := range cycles {
			if at < c.end && at+lat > c.start {
				r.gc = true
				r.pause = r.pause || at < c.start+c.stw1 && at+lat > c.start || at < c.end && at+lat > c.end-c.stw2
			}
		}
		if first == 0 || at < first {
			first = at
		}
		last = max(last, at+lat)
		reads = append(reads, r)
	}
	if len(reads) == 0 {
		log.Fatalf("gcjoin: no read of %q", *target)
	}
	// The share of the reads' span that collections covered: what the
	// share of reads overlapping one would be if collections did not
	// slow them (a read lasts far less than a collection).
	var covered int64
	for _, c := range cycles {
		covered += max(min(c.end, last)-max(c.start, first), 0)
	}
	lats := func(keep func(read) bool) []time.Duration {
		var out []time.Duration
		for _, r := range reads {
			if keep(r) {
				out = append(out, r.lat)
			}
		}
		slices.Sort(out)
		return out
	}
	all := lats(func(read) bool { return true })
	q := func(l []time.Duration, p float64) string {
		if len(l) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(l[min(int(p*float64(len(l))), len(l)-1)])/1e6)
	}
	fmt.Printf("%d reads of %s over %.1f s; %d collections covered %.1f%% of that time\n", len(reads), *target,
		float64(last-first)/1e9, len(cycles), 100*float64(covered)/float64(last-first))
	fmt.Printf("%-34s %7s %7s %8s %8s %8s\n", "reads", "count", "share", "p50 ms", "p99 ms", "p99.9 ms")
	for _, g := range []struct {
		name string
		keep func(read) bool
	}{
		{"all", func(read) bool { return true }},
		{"overlapping no collection", func(r read) bool { return !r.gc }},
		{"overlapping a collection", func(r read) bool { return r.gc }},
		{"  of which one of its pauses", func(r read) bool { return r.pause }},
	} {
		l := lats(g.keep)
		fmt.Printf("%-34s %7d %6.1f%% %8s %8s %8s\n", g.name, len(l), 100*float64(len(l))/float64(len(reads)), q(l, 0.5), q(l, 0.99), q(l, 0.999))
	}
	for _, p := range []float64{0.99, 0.999} {
		cut := all[min(int(p*float64(len(all))), len(all)-1)]
		n, gc := 0, 0
		for _, r := range reads {
			if r.lat >= cut {
				n++
				if r.gc {
					gc++
				}
			}
		}
		fmt.Printf("reads at or above p%g (%.2f ms): %d, of which %d (%.0f%%) overlapped a collection\n", p*100, float64(cut)/1e6, n, gc, 100*float64(gc)/float64(n))
	}
}

// lines returns the whitespace-separated fields of each line of file.
func lines(file string) [][]string {
	f, err := os.Open(file)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, strings.Fields(sc.Text()))
	}
	return out
}
