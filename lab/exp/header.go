package exp

import (
	"context"
	"runtime"
	"time"

	"github.com/tailgate-dev/tailgate/lab/load"
)

// reportVersion is the version of the experiments' JSON reports. Fields are
// only added within a version.
const reportVersion = 1

// Header opens every experiment's report: which experiment made it, in
// which version of the format, and where, when and with what seed. Reports
// embed it, so its fields come first in their JSON.
type Header struct {
	Version     int         `json:"version"`
	Experiment  string      `json:"experiment"`
	Environment Environment `json:"environment"`
}

// Start opens the header of a run of experiment with seed, now.
func Start(experiment string, seed uint64) Header {
	return Header{Version: reportVersion, Experiment: experiment, Environment: newEnvironment(seed)}
}

// Head returns h: a report that embeds a Header has it, which Report asks
// for.
func (h *Header) Head() *Header { return h }

// Report is what every experiment's report is: JSON that opens with a
// Header, and a section of the HTML page.
type Report interface {
	Head() *Header
	Sectioner
}

// Run runs a run's n steps in order (the sides, points or policies it
// compares), telling progress, when it is not nil, how many are done after
// each, and records in the report's header h how long they took. It stops
// at the first error, and when ctx has ended after a step.
func Run(ctx context.Context, h *Header, n int, progress func(done, total int), step func(i int) error) error {
	for i := range n {
		if err := step(i); err != nil {
			return err
		}
		if progress != nil {
			progress(i+1, n)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	h.Environment.finish()
	return nil
}

// Environment records where and how a report was made, so a figure can be
// traced to its machine and its seed.
type Environment struct {
	GoVersion  string    `json:"goVersion"`
	CPUs       int       `json:"cpus"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	OS         string    `json:"os"`
	Arch       string    `json:"arch"`
	Seed       uint64    `json:"seed"`
	Started    time.Time `json:"started"`
	DurationMs float64   `json:"durationMs"`
	// StolenMs is the CPU time the hypervisor took from the machine's
	// CPUs while the run ran (Stolen); absent where it cannot be read. A
	// tail latency measured while it was high says more about the
	// machine than about what ran on it.
	StolenMs *float64 `json:"stolenMs,omitempty"`

	stolenAtStart time.Duration
	stealReadable bool
}

func newEnvironment(seed uint64) Environment {
	e := Environment{
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS: runtime.GOOS, Arch: runtime.GOARCH, Seed: seed, Started: time.Now().UTC().Truncate(time.Millisecond),
	}
	e.stolenAtStart, e.stealReadable = Stolen()
	return e
}

// finish records how long the run took, and what was stolen meanwhile.
func (e *Environment) finish() {
	e.DurationMs = load.Ms(time.Since(e.Started))
	if now, ok := Stolen(); ok && e.stealReadable {
		ms := load.Ms(now - e.stolenAtStart)
		e.StolenMs = &ms
	}
}
