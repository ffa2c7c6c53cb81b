package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// page is a gateway's /metrics with the series the account reads.
func page(reads, primaries, hedges, fraction, burst float64) string {
	return fmt.Sprintf(`# HELP tailgate_requests_total Client requests answered.
# TYPE tailgate_requests_total counter
tailgate_requests_total{code="200",route="default"} %g
tailgate_requests_total{code="502",route="default"} 0
tailgate_attempts_total{role="hedge",route="default"} %g
tailgate_attempts_total{role="primary",route="default"} %g
tailgate_hedges_suppressed_total{reason="budget",route="default"} 3
tailgate_hedge_budget_fraction{route="default"} %g
tailgate_hedge_budget_burst{route="default"} %g
tailgate_in_flight{kind="requests"} 0
`, reads, hedges, primaries, fraction, burst)
}

// serve answers /metrics with the page body() returns at the time.
func serve(t *testing.T, body func() string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, body())
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// An instance's account is the difference between two scrapes of its
// real /metrics text, and its bound b + f·reads.
func TestAccountFromMetrics(t *testing.T) {
	cur := page(10, 10, 5, 0.1, 10)
	addr := serve(t, func() string { return cur })
	before, err := scrape(addr)
	if err != nil {
		t.Fatal(err)
	}
	cur = page(1010, 1010, 105, 0.1, 10)
	after, err := scrape(addr)
	if err != nil {
		t.Fatal(err)
	}
	in := account(addr, before, after)
	if in.reads != 1000 || in.primaries != 1000 || in.hedges != 100 || in.fraction != 0.1 || in.burst != 10 {
		t.Fatalf("account %+v, want 1000 reads, 1000 primaries, 100 hedges, f 0.1, b 10", in)
	}
	if b := in.bound(); b != 110 {
		t.Errorf("bound %v, want 10 + 0.1 × 1000 = 110", b)
	}
	if got := in.perRead(); got != 1.1 {
		t.Errorf("attempts per read %v, want 1.1", got)
	}
	if !in.within() {
		t.Error("100 hedges judged over a bound of 110")
	}
}

// A page without the budget's gauges is refused: it is not a hedging
// gateway, and a bound of 0 + 0·reads would judge nothing.
func TestScrapeRefusesNonGateway(t *testing.T) {
	addr := serve(t, func() string { return "go_goroutines 7\n" })
	if _, err := scrape(addr); err == nil || !strings.Contains(err.Error(), "tailgate_hedge_budget_fraction") {
		t.Fatalf("scrape of a page without the budget: %v", err)
	}
}

// The fleet's bound is the sum of the instances' bounds: N·b + f·(total
// reads) when they share f and b. The report passes a fleet within it,
// and fails one instance over its own bound even when the fleet's total
// is within, and, with -must-bind, a fleet where an instance's budget
// never refused a hedge.
func TestReportJudgesBounds(t *testing.T) {
	insts := []instance{
		{admin: "a", reads: 1000, primaries: 1000, hedges: 110, fraction: 0.1, burst: 10, suppressedBudget: 40},
		{admin: "b", reads: 500, primaries: 500, hedges: 20, fraction: 0.1, burst: 10, suppressedBudget: 1},
		{admin: "c", reads: 0, fraction: 0.1, burst: 10, suppressedBudget: 2},
	}
	total := fleet(insts)
	if b := total.bound(); b != 3*10+0.1*1500 {
		t.Fatalf("fleet bound %v, want 3 × 10 + 0.1 × 1500 = 180", b)
	}
	res := result{sent: 1500, codes: map[int]int{200: 1500}}
	var out bytes.Buffer
	if !report(&out, config{name: "ok", mustBind: true}, res, insts) {
		t.Errorf("a fleet within its bound failed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "0.1 × 1500 + 3 × 10 = 180.0") {
		t.Errorf("the report does not show the bound's terms:\n%s", out.String())
	}

	over := append([]instance(nil), insts...)
	over[1].hedges = 61 // b + f·500 = 60; the fleet's 171 is within 180
	out.Reset()
	if report(&out, config{name: "over"}, res, over) {
		t.Errorf("an instance over its bound passed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "OVER") {
		t.Errorf("the instance over its bound is not marked:\n%s", out.String())
	}

	unbound := append([]instance(nil), insts...)
	unbound[1].suppressedBudget = 0
	out.Reset()
	if report(&out, config{name: "unbound", mustBind: true}, res, unbound) {
		t.Errorf("an instance whose budget refused nothing passed -must-bind:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "b's budget refused no hedge") {
		t.Errorf("the instance that never reached its bound is not named:\n%s", out.String())
	}

	out.Reset()
	short := result{sent: 2000, codes: map[int]int{200: 2000}}
	if report(&out, config{name: "uncounted"}, short, insts) {
		t.Errorf("2000 answers with 1500 reads counted passed:\n%s", out.String())
	}
}

// HAProxy's "show stat" CSV: servers of the backend that are UP, not the
// frontend's or backend's own lines, nor another backend's servers.
func TestCountUp(t *testing.T) {
	csv := `# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight
fleet,FRONTEND,,,0,1,4096,3,0,0,0,0,0,,,,,OPEN,
gateways,g1,0,0,0,1,,1,0,0,,0,,0,0,0,0,UP,1
gateways,g2,0,0,0,1,,1,0,0,,0,,0,0,0,0,DOWN,1
gateways,g3,0,0,0,1,,1,0,0,,0,,0,0,0,0,UP,1
gateways,BACKEND,0,0,0,1,410,3,0,0,0,0,,0,0,0,0,UP,2
other,x1,0,0,0,1,,1,0,0,,0,,0,0,0,0,UP,1
`
	n, err := countUp(strings.NewReader(csv), "gateways")
	if err != nil || n != 2 {
		t.Errorf("countUp = %d, %v; want 2 (g1 and g3)", n, err)
	}
	if _, err := countUp(strings.NewReader("Unknown command.\n"), "gateways"); err == nil {
		t.Error("an answer without the CSV header was counted")
	}
}

// Addresses off loopback are refused.
func TestLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "10.0.0.1:80": false, "example.com:80": false, "127.0.0.1": false} {
		if err := loopback(addr); (err == nil) != ok {
			t.Errorf("loopback(%q) = %v", addr, err)
		}
	}
}
