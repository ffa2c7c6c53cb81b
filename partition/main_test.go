package partition

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the synthetic start of time of every test.
var t0 = time.Unix(1_700_000_000, 0)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("http://r%d.test", i)
	}
	return out
}

func mustNew(tb testing.TB, replicas []string, cfg Config) *Table {
	tb.Helper()
	t, err := New(replicas, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// keyOf returns a key of partition p of t.
func keyOf(tb testing.TB, t *Table, p int) string {
	tb.Helper()
	for i := 0; i < 1_000_000; i++ {
		if k := fmt.Sprintf("key-%d", i); t.Partition(k) == p {
			return k
		}
	}
	tb.Fatalf("no key for partition %d", p)
	return ""
}
