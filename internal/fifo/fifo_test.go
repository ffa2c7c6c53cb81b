package fifo

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type item struct {
	v     int
	links Links[item]
}

func (i *item) Links() *Links[item] { return &i.links }

func drain(l *List[item, *item]) []int {
	var out []int
	for e := l.Pop(); e != nil; e = l.Pop() {
		out = append(out, e.v)
	}
	return out
}

func TestFIFOOrderAndRemovalFromTheMiddle(t *testing.T) {
	var l List[item, *item]
	items := make([]*item, 5)
	for i := range items {
		items[i] = &item{v: i}
		l.Push(items[i])
	}
	if l.Len() != 5 || l.Front() != items[0] || l.Back() != items[4] || !items[2].links.In() {
		t.Fatalf("len %d front %v", l.Len(), l.Front())
	}
	l.Remove(items[2]) // the middle
	l.Remove(items[0]) // the head
	l.Remove(items[4]) // the tail
	if items[2].links.In() {
		t.Error("a removed element says it is in a list")
	}
	l.Push(items[2]) // back in, at the tail
	if got := drain(&l); len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 2 {
		t.Errorf("order %v, want [1 3 2]", got)
	}
	if l.Len() != 0 || l.Front() != nil || l.Pop() != nil {
		t.Error("a drained list is not empty")
	}
}

func TestPushPopAllocatesNothing(t *testing.T) {
	var l List[item, *item]
	e := &item{}
	if n := testing.AllocsPerRun(100, func() { l.Push(e); l.Pop() }); n != 0 {
		t.Errorf("%v allocations per push and pop", n)
	}
}
