package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/tailgate-dev/tailgate/hedge"
)

// skewedSecond reads, in one second of virtual time: 120 cold keys once,
// 30 keys owned by r0 four times each, and /hot 60 times; then a round.
func skewedSecond(t *testing.T, g *Gateway, heavy []string) {
	start := time.Now()
	for i := range 120 {
		mustGet(t, g, fmt.Sprintf("/cold/%d", i))
	}
	for range 4 {
		for _, k := range heavy {
			mustGet(t, g, k)
		}
	}
	for range 60 {
		mustGet(t, g, "/hot")
	}
	time.Sleep(time.Second - time.Since(start))
	g.Partitions().RebalanceAt(time.Now())
}

func TestAffinityDebugPartitionsAndMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newAffinityGateway(t, 6, Config{Policy: hedge.Policy{MaxAttempts: 1}})
		var heavy []string
		for k := 0; len(heavy) < 30; k++ {
			key := fmt.Sprintf("/heavy/%d", k)
			if slices.Contains(g.Partitions().OwnersAt(key, time.Now()).Replicas, "http://r0.test") {
				heavy = append(heavy, key)
			}
		}
		for range 13 {
			skewedSecond(t, g, heavy)
		}
		code, body := adminGet(g, "/debug/partitions")
		if code != 200 {
			t.Fatalf("/debug/partitions: %d %s", code, body)
		}
		var s partitionsView
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		if s.Key != "path" || s.Partitions != 120 || s.Owners != 2 || len(s.Assignment) != 120 || len(s.Replicas) != 6 || s.Rounds != 13 {
			t.Errorf("state: key %q, %d partitions, %d owners, %d assigned, %d replicas, %d rounds", s.Key, s.Partitions, s.Owners, len(s.Assignment), len(s.Replicas), s.Rounds)
		}
		if len(s.RecentMoves) == 0 || s.MovesTotal != uint64(len(s.RecentMoves)) || s.RecentMoves[0].From != "http://r0.test" ||
			!strings.Contains(s.RecentMoves[0].Reason, "r0.test load") {
			t.Errorf("moves %d: %+v", s.MovesTotal, s.RecentMoves)
		}
		if len(s.HotKeys) != 1 || s.HotKeys[0].Key != "/hot" || len(s.HotKeys[0].Replicas) != 4 {
			t.Errorf("hot keys %+v", s.HotKeys)
		}
		if s.Replicas[0].Served <= 0 || s.LoadMaxOverMean <= 0 {
			t.Errorf("loads: %+v, max/mean %v", s.Replicas[0], s.LoadMaxOverMean)
		}
		for _, f := range []string{`"recentMoves"`, `"hotKeys"`, `"assignment"`, `"loadMaxOverMean"`, `"servedMaxOverMean"`, `"keyless": 0`, `"fallbacks": 0`, `"rebalanceEveryMs": 3600000`} {
			if !strings.Contains(body, f) {
				t.Errorf("/debug/partitions lacks %s", f)
			}
		}
		if v := gaugeValue(t, g, "tailgate_partition_moves_total"); v != float64(s.MovesTotal) {
			t.Errorf("tailgate_partition_moves_total %v, want %d", v, s.MovesTotal)
		}
		if v := gaugeValue(t, g, "tailgate_hot_keys"); v != 1 {
			t.Errorf("tailgate_hot_keys %v, want 1", v)
		}
		if v := gaugeValue(t, g, "tailgate_partition_load_imbalance"); v != s.ServedMaxOverMean || v < 1 {
			t.Errorf("tailgate_partition_load_imbalance %v, want %v", v, s.ServedMaxOverMean)
		}
		t.Logf("%d moves; model max/mean %.2f, served max/mean %.2f", s.MovesTotal, s.LoadMaxOverMean, s.ServedMaxOverMean)
		mfs, err := g.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			if strings.HasPrefix(p.Metric, "tailgate_partition") || strings.HasPrefix(p.Metric, "tailgate_hot") || strings.HasPrefix(p.Metric, "tailgate_affinity") {
				t.Errorf("lint: %s: %s", p.Metric, p.Text)
			}
		}
	})
}

func TestDebugPartitionsWithoutAffinity(t *testing.T) {
	urls, _ := hosts(2)
	g, err := New(Config{Backends: urls})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if code, body := adminGet(g, "/debug/partitions"); code != 404 || !strings.Contains(body, "affinity mode is off") {
		t.Errorf("/debug/partitions without affinity: %d %s", code, body)
	}
	mfs, _ := g.Registry().Gather()
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "tailgate_partition") || strings.HasPrefix(mf.GetName(), "tailgate_affinity") {
			t.Errorf("series %s without affinity mode", mf.GetName())
		}
	}
}
