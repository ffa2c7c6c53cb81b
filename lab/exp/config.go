package exp

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// ErrConfig is wrapped by every configuration error of an experiment: a
// caller branches on it to tell a bad configuration (the user's to fix)
// from a run that failed.
var ErrConfig = errors.New("lab: invalid experiment config")

// FieldError says which setting of an experiment's configuration is wrong
// and why. It wraps ErrConfig.
type FieldError struct {
	Experiment string
	// Field names the setting as the command line spells its flag
	// ("hedge-delay"), so that the CLI can point at the flag; empty when
	// the problem is with several settings together.
	Field string
	// Value is the setting's value, nil when it says nothing (a list left
	// empty); Problem what is wrong with it ("must be within [2, 16]"),
	// or, without a Field, the whole story.
	Value   any
	Problem string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("lab %s: %s", e.Experiment, e.Describe(""))
}

// Describe says what is wrong, naming the setting after prefix: "-" names
// it as the CLI's flag.
func (e *FieldError) Describe(prefix string) string {
	switch {
	case e.Field == "":
		return e.Problem
	case e.Value == nil:
		return prefix + e.Field + " " + e.Problem
	}
	return fmt.Sprintf("%s%s %v %s", prefix, e.Field, e.Value, e.Problem)
}

func (e *FieldError) Unwrap() error { return ErrConfig }

// Checker keeps the first problem found with an experiment's
// configuration, so that a Validate method reads as a list of rules.
type Checker struct {
	experiment string
	err        error
}

// NewChecker returns a Checker for experiment's configuration.
func NewChecker(experiment string) *Checker { return &Checker{experiment: experiment} }

// Check records, unless a problem is recorded already, that field's value
// has a problem when ok is false. An empty field makes the problem the
// configuration's as a whole.
func (c *Checker) Check(ok bool, field string, value any, problem string, args ...any) {
	if ok || c.err != nil {
		return
	}
	c.err = &FieldError{Experiment: c.experiment, Field: field, Value: value, Problem: fmt.Sprintf(problem, args...)}
}

// Fail records err (one that is not about a single setting, such as an
// invalid latency model) unless a problem is recorded already.
func (c *Checker) Fail(err error) {
	if c.err == nil && err != nil {
		c.err = err
	}
}

// Err returns the first problem recorded, nil if none.
func (c *Checker) Err() error { return c.err }

// Within checks that lo <= v <= hi. A NaN is never within.
func Within[T cmp.Ordered](c *Checker, field string, v, lo, hi T) {
	c.Check(v >= lo && v <= hi, field, v, "must be within [%v, %v]", lo, hi)
}

// Above checks that lo < v <= hi. A NaN is never within.
func Above[T cmp.Ordered](c *Checker, field string, v, lo, hi T) {
	c.Check(v > lo && v <= hi, field, v, "must be within (%v, %v]", lo, hi)
}

// Default sets *v to d when *v is zero: how a Config's withDefaults fills
// in its Defaults. Not for interfaces (a model): comparing one that holds
// a slice panics.
func Default[T int | float64 | uint64 | time.Duration](v *T, d T) {
	if *v == 0 {
		*v = d
	}
}
