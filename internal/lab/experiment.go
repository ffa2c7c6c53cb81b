package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"time"
)

// ReportVersion is the version of the experiments' JSON reports. Fields are
// only added within a version.
const ReportVersion = 1

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
}

func newEnvironment(seed uint64) Environment {
	return Environment{
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS: runtime.GOOS, Arch: runtime.GOARCH, Seed: seed, Started: time.Now().UTC().Truncate(time.Millisecond),
	}
}

func (e *Environment) finish() { e.DurationMs = ms(time.Since(e.Started)) }

// Work is what fixtures did during one run, from their own counters, next
// to what the client believes it sent. The two need not match: an attempt
// cancelled before it was written never reaches a server. Unreconciled
// says by how much they differ.
type Work struct {
	ClientAttempts        int64 `json:"clientAttempts"`
	Started               int64 `json:"started"`
	Completed             int64 `json:"completed"`
	CompletedAfterCancel  int64 `json:"completedAfterCancel"`
	CancellationsObserved int64 `json:"cancellationsObserved"`
	Rejected              int64 `json:"rejected"`
	// Unreconciled is ClientAttempts - Started.
	Unreconciled int64 `json:"unreconciled"`
	// PerRequest is Started per client request.
	PerRequest float64 `json:"perRequest"`
}

func workBetween(before, after Stats, clientAttempts int64, requests int) Work {
	w := Work{
		ClientAttempts:        clientAttempts,
		Started:               after.Started - before.Started,
		Completed:             after.Completed - before.Completed,
		CompletedAfterCancel:  after.CompletedAfterCancel - before.CompletedAfterCancel,
		CancellationsObserved: after.CancellationsObserved - before.CancellationsObserved,
		Rejected:              after.Rejected - before.Rejected,
	}
	w.Unreconciled = w.ClientAttempts - w.Started
	if requests > 0 {
		w.PerRequest = float64(w.Started) / float64(requests)
	}
	return w
}

// ErrNotValue is the verdict on an answer that is not HTTP 200 with JSON
// {"value": "<non-empty string>"}.
var ErrNotValue = errors.New(`lab: answer is not 200 with JSON {"value": non-empty}`)

// AcceptValue is the lab client's acceptance check: HTTP 200 and a JSON
// body whose "value" is a non-empty string. Anything else is refused with
// a reason that names what was wrong, so that a misbehaving endpoint shows
// in the receipts per attempt instead of counting as a win.
func AcceptValue(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: status %d", ErrNotValue, resp.StatusCode)
	}
	var body []byte
	if b, ok := resp.Body.(interface{ Bytes() []byte }); ok {
		body = b.Bytes() // the hedging transport's buffer: leave it unread
	} else {
		var err error
		if body, err = io.ReadAll(resp.Body); err != nil {
			return fmt.Errorf("%w: reading body: %w", ErrNotValue, err)
		}
	}
	var v struct {
		Value *string `json:"value"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("%w: body %.40q is not JSON", ErrNotValue, body)
	}
	if v.Value == nil || *v.Value == "" {
		return fmt.Errorf("%w: body %.40q has no non-empty value", ErrNotValue, body)
	}
	return nil
}
