package load

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"time"
)

// Summary condenses outcomes: counts, throughput and latency percentiles,
// latency being measured from each request's scheduled time.
//
// The percentiles are over all requests, not over the successful ones only:
// a request that failed, timed out, was dropped or was never sent got no
// good answer, and counts as infinitely slow (+Inf). Otherwise failures
// would vanish from the tail, and a run whose slow reads time out would
// show a better p99 than one whose slow reads succeed. A percentile whose
// nearest rank falls on such a request is therefore +Inf: with 2 of 100
// requests failed, p99, p99.9 and the maximum are +Inf; with none
// succeeded, every percentile is. With no requests at all they are NaN.
//
// JSON writes an infinite or NaN percentile as null, never as a made-up
// number. It writes the percentiles as Summarize computed them: make a
// Summary with Summarize, as one whose percentiles were set by hand writes
// them as null.
type Summary struct {
	Requests  int `json:"requests"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Dropped   int `json:"dropped"`
	// summaryJSON is how JSON sees the percentiles below.
	summaryJSON
	P50Ms  float64 `json:"-"`
	P90Ms  float64 `json:"-"`
	P99Ms  float64 `json:"-"`
	P999Ms float64 `json:"-"`
	MaxMs  float64 `json:"-"`
	// GoodputPerSec is successful requests per second of the run.
	GoodputPerSec float64 `json:"goodputPerSec"`
	// FirstError is the first failure's message, empty if none failed.
	FirstError string `json:"firstError,omitempty"`
}

// summaryJSON holds Summary's percentiles as JSON writes them, under the
// names of the fields it mirrors (which hide its own). Summary cannot have
// a MarshalJSON method: reports embed Summary, and the method would be
// promoted to them and write the Summary in place of the whole report.
type summaryJSON struct {
	P50Ms  jsonMs `json:"p50Ms"`
	P90Ms  jsonMs `json:"p90Ms"`
	P99Ms  jsonMs `json:"p99Ms"`
	P999Ms jsonMs `json:"p999Ms"`
	MaxMs  jsonMs `json:"maxMs"`
}

// jsonMs is a latency in ms as JSON writes it: null when it was not set or
// is not finite.
type jsonMs struct {
	v   float64
	set bool
}

func msJSON(v float64) jsonMs { return jsonMs{v: v, set: true} }

// String writes m as JSON does, so that %v of a Summary stays readable.
func (m jsonMs) String() string {
	b, _ := m.MarshalJSON()
	return string(b)
}

// MarshalJSON implements json.Marshaler.
func (m jsonMs) MarshalJSON() ([]byte, error) {
	if !m.set || math.IsInf(m.v, 0) || math.IsNaN(m.v) {
		return []byte("null"), nil
	}
	return json.Marshal(m.v)
}

// Summarize computes a Summary; the run lasted elapsed.
func Summarize(outs []Outcome, elapsed time.Duration) Summary {
	s := Summary{Requests: len(outs)}
	for _, o := range outs {
		switch {
		case o.Err == nil:
			s.Succeeded++
		case errors.Is(o.Err, ErrDropped):
			s.Dropped++
		default:
			s.Failed++
			if s.FirstError == "" {
				s.FirstError = o.Err.Error()
			}
		}
	}
	if lat := SortedMs(outs); len(lat) > 0 {
		s.P50Ms, s.P90Ms, s.P99Ms = Rank(lat, 0.5), Rank(lat, 0.9), Rank(lat, 0.99)
		s.P999Ms, s.MaxMs = Rank(lat, 0.999), lat[len(lat)-1]
	} else {
		nan := math.NaN()
		s.P50Ms, s.P90Ms, s.P99Ms, s.P999Ms, s.MaxMs = nan, nan, nan, nan, nan
	}
	s.summaryJSON = summaryJSON{msJSON(s.P50Ms), msJSON(s.P90Ms), msJSON(s.P99Ms), msJSON(s.P999Ms), msJSON(s.MaxMs)}
	if elapsed > 0 {
		s.GoodputPerSec = math.Round(float64(s.Succeeded)/elapsed.Seconds()*10) / 10
	}
	return s
}

// SortedMs returns every outcome's latency in ms, sorted, as Summarize
// ranks them: those without a good answer (failed, dropped) +Inf, at the
// end.
func SortedMs(outs []Outcome) []float64 {
	lat := make([]float64, 0, len(outs))
	for _, o := range outs {
		if o.Err == nil {
			lat = append(lat, Ms(o.Latency))
		} else {
			lat = append(lat, math.Inf(1))
		}
	}
	slices.Sort(lat)
	return lat
}

// LatenciesMs returns the latencies of the successful outcomes, in ms: the
// finite ones. A CDF of them must be drawn out of all len(outs) requests
// (report.CDFOutOf), so that it tops out at the share that succeeded rather
// than at 1, as failures would otherwise vanish from it.
func LatenciesMs(outs []Outcome) []float64 {
	lat := make([]float64, 0, len(outs))
	for _, o := range outs {
		if o.Err == nil {
			lat = append(lat, Ms(o.Latency))
		}
	}
	return lat
}

// Ms returns d in milliseconds, to the microsecond.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Rank returns the nearest-rank q-quantile of sorted x.
func Rank(x []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(x)))) - 1
	return x[min(max(i, 0), len(x)-1)]
}
