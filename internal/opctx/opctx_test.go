package opctx

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestCancel(t *testing.T) {
	c := New(context.Background())
	done := c.Done()
	if c.Err() != nil || closed(done) {
		t.Fatal("a new Ctx has ended")
	}
	c.Cancel()
	c.Cancel() // once only
	if !errors.Is(c.Err(), context.Canceled) || !closed(done) || !closed(c.Done()) {
		t.Fatalf("after Cancel: Err %v, Done closed %v", c.Err(), closed(done))
	}
	if got := context.Cause(c); got != context.Canceled {
		t.Errorf("Cause = %v, want context.Canceled", got)
	}
	if _, ok := c.Deadline(); ok {
		t.Error("a Ctx without a deadline has one")
	}
}

func TestValueComesFromTheParent(t *testing.T) {
	type key struct{}
	c := New(context.WithValue(context.Background(), key{}, "v"))
	defer c.Cancel()
	if c.Value(key{}) != "v" {
		t.Error("the parent's value is lost")
	}
}

func TestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Ctx
		now := time.Now()
		c.Init(context.Background(), now.Add(10*time.Millisecond))
		c.Arm(now)
		if dl, ok := c.Deadline(); !ok || !dl.Equal(now.Add(10*time.Millisecond)) {
			t.Fatalf("Deadline = %v, %v", dl, ok)
		}
		time.Sleep(9 * time.Millisecond)
		if c.Err() != nil {
			t.Fatal("ended before its deadline")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !errors.Is(c.Err(), context.DeadlineExceeded) || context.Cause(&c) != context.DeadlineExceeded {
			t.Fatalf("at the deadline: Err %v", c.Err())
		}
		c.Cancel() // after the deadline: changes nothing
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Error("Cancel after the deadline changed the Ctx")
		}
	})
}

func TestOwnerCancelStopsTheTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Ctx
		now := time.Now()
		c.Init(context.Background(), now.Add(time.Second))
		c.Arm(now)
		c.Cancel()
		if c.timer.Stop() {
			t.Error("the timer is still armed after Cancel")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !errors.Is(c.Err(), context.Canceled) {
			t.Errorf("Err %v, want Canceled", c.Err())
		}
	})
}

func TestParentEndsChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent := New(context.Background())
		var c Ctx
		c.Init(parent, time.Time{})
		parent.Cancel()
		synctest.Wait()
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("child: Err %v", c.Err())
		}
		if parent.watches != nil {
			t.Error("the parent still holds the child's registration")
		}
	})
}

func TestChildEndsAloneAndLetsGoOfItsParent(t *testing.T) {
	parent := New(context.Background())
	defer parent.Cancel()
	var c Ctx
	c.Init(parent, time.Time{})
	c.Cancel()
	if parent.Err() != nil {
		t.Fatal("a child's end ended its parent")
	}
	if parent.watches != nil {
		t.Error("an ended child is still registered on its parent")
	}
}

func TestParentsEarlierDeadlineIsTheChilds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		var parent, c Ctx
		parent.Init(context.Background(), now.Add(5*time.Millisecond))
		parent.Arm(now)
		c.Init(&parent, now.Add(10*time.Millisecond))
		c.Arm(now)
		if dl, _ := c.Deadline(); !dl.Equal(now.Add(5 * time.Millisecond)) {
			t.Fatalf("Deadline = %v, want the parent's", dl)
		}
		if c.timer != nil {
			t.Error("a timer armed for a deadline the parent's comes before")
		}
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Errorf("Err = %v, want the parent's DeadlineExceeded", c.Err())
		}
	})
}

// Start refuses a parent the context package can cancel: context.Cause
// would find that parent's cause, not the Ctx's (see Usable).
func TestStartRefusesAStandardParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer func() {
		if recover() == nil {
			t.Error("Start over a WithCancel context did not panic")
		}
	}()
	var c Ctx
	c.Init(parent, time.Time{})
}

func TestWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(context.Background())
		var ran atomic.Int32
		a := NewWatch(func() { ran.Add(1) })
		b := NewWatch(func() { ran.Add(10) })
		c.Watch(&a)
		c.Watch(&b)
		if !c.Unwatch(&a) {
			t.Fatal("Unwatch of a registered watch reported false")
		}
		if c.Unwatch(&a) {
			t.Error("a second Unwatch reported true")
		}
		c.Cancel()
		synctest.Wait()
		if ran.Load() != 10 {
			t.Fatalf("ran %d, want only b's 10", ran.Load())
		}
		if c.Unwatch(&b) {
			t.Error("Unwatch after its function started reported true")
		}
		late := NewWatch(func() { ran.Add(100) })
		c.Watch(&late) // on an ended Ctx: runs at once
		synctest.Wait()
		if ran.Load() != 110 {
			t.Errorf("a watch registered after the end did not run (%d)", ran.Load())
		}
	})
}

func TestWatchAllocatesNothing(t *testing.T) {
	c := New(context.Background())
	defer c.Cancel()
	w := NewWatch(func() {})
	if n := testing.AllocsPerRun(100, func() {
		c.Watch(&w)
		c.Unwatch(&w)
	}); n != 0 {
		t.Errorf("Watch and Unwatch: %v allocations, want 0", n)
	}
}

// Contexts of the context package made over a Ctx (net/http's, say)
// register through its AfterFunc and end with it.
func TestDerivedContexts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(context.Background())
		child, cancel := context.WithCancel(c)
		defer cancel()
		var ran atomic.Bool
		stop := context.AfterFunc(c, func() { ran.Store(true) })
		other := context.AfterFunc(c, func() { t.Error("a stopped AfterFunc ran") })
		if !other() {
			t.Fatal("stop of a pending AfterFunc reported false")
		}
		c.Cancel()
		synctest.Wait()
		if !errors.Is(child.Err(), context.Canceled) || context.Cause(child) != context.Canceled {
			t.Errorf("derived: Err %v, Cause %v", child.Err(), context.Cause(child))
		}
		if !ran.Load() || stop() {
			t.Error("AfterFunc did not run, or its stop said it had not")
		}
	})
}

func TestUsable(t *testing.T) {
	type key struct{}
	cancelled, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := New(context.Background())
	defer c.Cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"Background", context.Background(), true},
		{"a value over Background", context.WithValue(context.Background(), key{}, 1), true},
		{"WithCancel", cancelled, false},
		{"a value over a WithCancel", context.WithValue(cancelled, key{}, 1), false},
		{"WithoutCancel", context.WithoutCancel(cancelled), true},
		{"a Ctx", c, true},
		{"a value over a Ctx", context.WithValue(c, key{}, 1), false},
	} {
		if got := Usable(tc.ctx); got != tc.want {
			t.Errorf("Usable(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

type wrapper struct {
	context.Context
	c *Ctx
}

func (w wrapper) OpCtx() *Ctx { return w.c }

func TestOf(t *testing.T) {
	c := New(context.Background())
	defer c.Cancel()
	if Of(c) != c || Of(wrapper{c, c}) != c || Of(context.Background()) != nil {
		t.Error("Of found the wrong Ctx")
	}
}

// The own deadline's timer waits for Arm: a Ctx never armed does not end
// at its deadline (its owner arms it in time, or ends it sooner); Arm
// twice arms one timer, and Arm after the end none.
func TestDeadlineWaitsForArm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		var c Ctx
		c.Init(context.Background(), now.Add(time.Millisecond))
		if dl, ok := c.Deadline(); !ok || !dl.Equal(now.Add(time.Millisecond)) {
			t.Fatalf("Deadline before Arm = %v, %v", dl, ok)
		}
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		if c.Err() != nil {
			t.Fatal("ended at a deadline never armed")
		}
		c.Arm(time.Now()) // passed: fires at once
		first := c.timer
		c.Arm(time.Now())
		if c.timer != first {
			t.Error("a second Arm made another timer")
		}
		synctest.Wait()
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("after Arm past the deadline: Err %v", c.Err())
		}

		var d Ctx
		d.Init(context.Background(), time.Now().Add(time.Second))
		d.Cancel()
		d.Arm(time.Now())
		if d.timer != nil {
			t.Error("Arm after the end armed a timer")
		}
	})
}
