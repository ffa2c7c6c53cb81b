package probation

import (
	"math"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/replica"
)

// timeline turns a run's outcomes, arrivals and transitions into seconds.
type timeline struct {
	seconds     int
	names       []string
	degraded    int
	from, to    float64 // the degradation, ms since the run started
	probation   bool
	transitions []transition
	end         float64 // ms; default: the end of the last second
}

// status returns replica i's probation status at ms since the run started:
// the destination of its last transition at or before it.
func (tl timeline) status(i int, at float64) replica.ProbationStatus {
	st := replica.Serving
	for _, t := range tl.transitions {
		if t.index == i && t.AtMs <= at {
			st = t.To
		}
	}
	return st
}

// onProbation returns the intervals (ms) during which replica i was out of
// the rotation, within the timeline.
func (tl timeline) onProbation(i int) [][2]float64 {
	end := tl.end
	if end == 0 {
		end = float64(tl.seconds) * 1000
	}
	var out [][2]float64
	open, since := false, 0.0
	for _, t := range tl.transitions {
		if t.index != i {
			continue
		}
		switch on := t.To.OnProbation(); {
		case on && !open:
			open, since = true, t.AtMs
		case !on && open:
			open = false
			out = append(out, [2]float64{since, t.AtMs})
		}
	}
	if open {
		out = append(out, [2]float64{since, max(end, since)})
	}
	return out
}

// build returns one entry per second: the reads scheduled in it, what each
// replica received in it (arrivals after the last second count in it) and
// the replicas' probation.
func (tl timeline) build(outs []load.Outcome, arrivals []arrivalAt) []Second {
	secs := make([]Second, tl.seconds)
	byReads := make([][]load.Outcome, tl.seconds)
	for _, o := range outs {
		s := min(max(int(o.Scheduled/time.Second), 0), tl.seconds-1)
		byReads[s] = append(byReads[s], o)
	}
	probation := make([][][2]float64, len(tl.names))
	for i := range tl.names {
		if tl.probation {
			probation[i] = tl.onProbation(i)
		}
	}
	for s := range secs {
		lo, hi := float64(s)*1000, float64(s+1)*1000
		sec := &secs[s]
		sec.Second = s
		sum := load.Summarize(byReads[s], time.Second)
		sec.Reads, sec.Failed = sum.Requests, sum.Failed+sum.Dropped
		sec.p99 = sum.P99Ms
		if exp.Drawable(sum.P50Ms) {
			sec.P50Ms = ptr(sum.P50Ms)
		}
		if exp.Drawable(sum.P99Ms) {
			sec.P99Ms = ptr(sum.P99Ms)
		}
		sec.Degraded = tl.from < hi && tl.to > lo
		sec.Replicas = make([]replicaSecond, len(tl.names))
		for i, n := range tl.names {
			r := &sec.Replicas[i]
			r.Name = n
			if !tl.probation {
				continue
			}
			r.Status = tl.status(i, hi).String()
			for _, iv := range probation[i] {
				if d := min(iv[1], hi) - max(iv[0], lo); d > 0 {
					r.OnProbationMs += d
				}
			}
			r.OnProbationMs = exp.Round3(r.OnProbationMs)
		}
		sec.OnProbation = sec.Replicas[tl.degraded].OnProbationMs > 0
	}
	for _, a := range arrivals {
		s := min(max(int(math.Floor(a.atMs/1000)), 0), tl.seconds-1)
		r := &secs[s].Replicas[a.replica]
		switch a.kind {
		case kindPrimary:
			r.Primaries++
		case kindHedge:
			r.Hedges++
		case kindShadow:
			r.Shadows++
		}
	}
	for s := range secs {
		d := secs[s].Replicas[tl.degraded]
		secs[s].DegradedAttempts, secs[s].DegradedShadows = d.Primaries+d.Hedges, d.Shadows
	}
	return secs
}

// poller follows the replicas' probation statuses and records
// their transitions. It is used from one goroutine at a time.
type poller struct {
	set         *replica.Set
	names       []string // the replicas' names in the report, by index
	start       time.Time
	last        []replica.ProbationStatus
	lastAt      []float64
	transitions []transition
}

func newPoller(set *replica.Set, names []string, start time.Time) *poller {
	return &poller{set: set, names: names, start: start}
}

func (p *poller) poll(now time.Time) {
	p.observe(p.set.Snapshot(now), now)
}

// observe records the transitions between the last statuses seen and
// states, read at now. A move on or off probation, and the start of a
// divergence, are dated by the replica set (the status's Since); other
// moves, and any date the set does not give, by now. Dates never go back
// for a replica, nor past now.
func (p *poller) observe(states []replica.State, now time.Time) {
	if p.last == nil {
		p.last = make([]replica.ProbationStatus, len(states))
		p.lastAt = make([]float64, len(states))
	}
	nowMs := load.Ms(now.Sub(p.start))
	for i, s := range states {
		if s.Probation == nil || i >= len(p.last) {
			continue
		}
		from, to := p.last[i], s.Probation.Status
		if from == to {
			continue
		}
		at := nowMs
		dated := to == replica.Diverging || to == replica.OnProbation && !from.OnProbation() ||
			to == replica.Serving && from.OnProbation()
		if dated && !s.Probation.Since.IsZero() {
			at = min(load.Ms(s.Probation.Since.Sub(p.start)), nowMs)
		}
		at = max(at, p.lastAt[i])
		name := s.Name
		if i < len(p.names) {
			name = p.names[i]
		}
		p.transitions = append(p.transitions, transition{AtMs: at, Replica: name, From: from, To: to,
			Reason: s.Probation.Reason, index: i})
		p.last[i], p.lastAt[i] = to, at
	}
}
