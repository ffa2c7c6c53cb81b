package report

import "math"

// inBox reports whether c lies in box (minX, minY, maxX, maxY).
func inBox(c [2]float64, box [4]float64) bool {
	return c[0] >= box[0] && c[0] <= box[2] && c[1] >= box[1] && c[1] <= box[3]
}

// clipRuns cuts a polyline to box (minX, minY, maxX, maxY) and returns the
// visible runs. The clip path would hide the rest anyway, but points far
// outside a fixed range can have coordinates too large for a renderer to
// draw the visible part faithfully.
func clipRuns(pts [][2]float64, box [4]float64) [][][2]float64 {
	all := true
	for _, c := range pts {
		if !inBox(c, box) || !finite(c[0]) || !finite(c[1]) {
			all = false
			break
		}
	}
	if all {
		return [][][2]float64{pts}
	}
	var runs [][][2]float64
	var run [][2]float64
	for k := 1; k < len(pts); k++ {
		a, b, ok := clipSegment(pts[k-1], pts[k], box)
		if !ok {
			if len(run) > 1 {
				runs = append(runs, run)
			}
			run = nil
			continue
		}
		if len(run) == 0 || run[len(run)-1] != a {
			if len(run) > 1 {
				runs = append(runs, run)
			}
			run = [][2]float64{a}
		}
		run = append(run, b)
	}
	if len(run) > 1 {
		runs = append(runs, run)
	}
	return runs
}

// clipSegment clips the segment a-b to box with the Liang–Barsky algorithm.
// A clipped end is put exactly on the edge it crosses and its other
// coordinate is interpolated from the nearer endpoint: with one endpoint
// thousands of plot widths away, interpolating from that one would lose the
// crossing point to rounding.
func clipSegment(a, b [2]float64, box [4]float64) ([2]float64, [2]float64, bool) {
	if !finite(a[0]) || !finite(a[1]) || !finite(b[0]) || !finite(b[1]) {
		return a, b, false
	}
	// Both ends beyond the same edge: nothing to draw. This also spares the
	// parametric test below from deciding it on rounded t values.
	if (a[0] < box[0] && b[0] < box[0]) || (a[0] > box[2] && b[0] > box[2]) ||
		(a[1] < box[1] && b[1] < box[1]) || (a[1] > box[3] && b[1] > box[3]) {
		return a, b, false
	}
	d := [2]float64{b[0] - a[0], b[1] - a[1]}
	t0, t1 := 0.0, 1.0
	e0, e1 := -1, -1 // the edges that set t0 and t1: 0 left, 1 right, 2 top, 3 bottom
	for e, pq := range [4][2]float64{{-d[0], a[0] - box[0]}, {d[0], box[2] - a[0]}, {-d[1], a[1] - box[1]}, {d[1], box[3] - a[1]}} {
		p, q := pq[0], pq[1]
		if p == 0 {
			if q < 0 {
				return a, b, false
			}
			continue
		}
		t := q / p
		if p < 0 && t > t0 {
			t0, e0 = t, e
		} else if p > 0 && t < t1 {
			t1, e1 = t, e
		}
		if t0 > t1 {
			return a, b, false
		}
	}
	ca, cb := onEdge(a, b, d, e0, box), onEdge(b, a, d, e1, box)
	// A segment that only grazes a corner can pass the test above through
	// rounding; what it would draw lies outside.
	grown := [4]float64{box[0] - 0.05, box[1] - 0.05, box[2] + 0.05, box[3] + 0.05}
	if !inBox(ca, grown) || !inBox(cb, grown) {
		return a, b, false
	}
	return ca, cb, true
}

// onEdge returns p, or when edge is not -1 the point where the line through
// a and b (direction d) crosses that edge of box.
func onEdge(p, other, d [2]float64, edge int, box [4]float64) [2]float64 {
	if edge < 0 {
		return p
	}
	k := edge / 2        // the coordinate fixed by the edge: 0 for x, 1 for y
	v := box[edge%2*2+k] // left/top are box[0]/box[1], right/bottom box[2]/box[3]
	near := p
	if math.Abs(v-other[k]) < math.Abs(v-p[k]) {
		near = other
	}
	var out [2]float64
	out[k] = v
	out[1-k] = near[1-k] + (v-near[k])*(d[1-k]/d[k])
	return out
}
