package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The operations files that name the gateway's series: the Grafana
// dashboard, the alerting rules and their unit tests.
const (
	dashboardFile = "../deploy/grafana/tailgate.json"
	rulesFile     = "../deploy/prometheus/tailgate-rules.yml"
	rulesTestFile = "../deploy/prometheus/tailgate-rules.test.yml"
)

// series is what a registry exposes: by family, its type and, by label,
// the values seen.
type series map[string]*family

type family struct {
	typ    dto.MetricType
	labels map[string]map[string]bool
}

// exposed gathers the series of real gateways, in hedge mode and in tied
// mode (whose series only it has), after a few reads.
func exposed(t *testing.T) series {
	t.Helper()
	out := series{}
	// Hedging, tied and affinity mode each add series of their own.
	for _, mode := range []Config{{}, {Tied: true}, {Affinity: &Affinity{Key: "path"}}} {
		synctest.Test(t, func(t *testing.T) {
			m := newMemReplicas(map[string]time.Duration{"a.test": time.Millisecond, "b.test": 2 * time.Millisecond})
			cfg := mode
			cfg.Backends, cfg.Base = []string{"http://a.test", "http://b.test"}, m
			g, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			// A discovered name, as tailgate serve reports its DNS names:
			// the tailgate_discovery_* series.
			g.SetDiscovery(func() []DiscoveryStatus {
				return []DiscoveryStatus{{Name: "dns+http://replicas.test:8080", Backends: cfg.Backends, Errors: 1}}
			})
			for range 3 {
				if code, body, _ := getIn(g, "/x"); code != http.StatusOK {
					t.Fatalf("%d %q", code, body)
				}
			}
			synctest.Wait()
			mfs, err := g.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				f := out[mf.GetName()]
				if f == nil {
					f = &family{typ: mf.GetType(), labels: map[string]map[string]bool{}}
					out[mf.GetName()] = f
				}
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if f.labels[l.GetName()] == nil {
							f.labels[l.GetName()] = map[string]bool{}
						}
						f.labels[l.GetName()][l.GetValue()] = true
					}
				}
			}
		})
	}
	for name, labels := range binarySeries {
		out[name] = &family{typ: dto.MetricType_GAUGE, labels: labels}
	}
	return out
}

// binarySeries are the series that tailgate serve adds beside the
// gateway's, with their labels' values: the client connection limit's
// (cmd/tailgate's connCollector; TestServeMaxConns reads them from a
// running serve).
var binarySeries = map[string]map[string]map[string]bool{
	"tailgate_client_connections":                 {"state": {"busy": true, "idle": true}},
	"tailgate_client_connections_max":             {},
	"tailgate_client_connections_refused_total":   {},
	"tailgate_client_connections_reclaimed_total": {},
}

// lookup finds the family a name in a query refers to: itself, or the
// histogram whose _bucket, _sum or _count it is.
func (s series) lookup(name string) *family {
	if f := s[name]; f != nil {
		return f
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if f := s[strings.TrimSuffix(name, suffix)]; f != nil && strings.HasSuffix(name, suffix) && f.typ == dto.MetricType_HISTOGRAM {
			return f
		}
	}
	return nil
}

var (
	seriesName = regexp.MustCompile(`\btailgate_[a-z0-9_]*[a-z0-9]`)
	selector   = regexp.MustCompile(`\b(tailgate_[a-z0-9_]+)\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

// scrapeLabels are added by Prometheus as it scrapes, not by the gateway;
// le is a histogram bucket's bound. The values of configLabels depend on
// the configuration (replica: the backends' URLs; name: the DNS names of
// tailgate serve's -backends).
var (
	scrapeLabels = []string{"job", "instance", "le"}
	configLabels = []string{"replica", "name"}
)

// checkQueries checks every tailgate_* series that text names, and the
// labels and label values its selectors match on, against what real
// gateways expose: a series or label renamed in the code and not in the
// dashboard or the rules fails here, not on an operator's screen.
func checkQueries(errorf func(format string, args ...any), where, text string, s series) (names int) {
	for _, name := range seriesName.FindAllString(text, -1) {
		names++
		if s.lookup(name) == nil {
			errorf("%s: %s is not a series of the gateway", where, name)
		}
	}
	for _, sel := range selector.FindAllStringSubmatch(text, -1) {
		f := s.lookup(sel[1])
		if f == nil {
			continue // reported above
		}
		for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
			label, op, value := m[1], m[2], m[3]
			if slices.Contains(scrapeLabels, label) {
				continue
			}
			values, ok := f.labels[label]
			switch {
			case !ok:
				errorf("%s: %s has no label %q (in %s)", where, sel[1], label, sel[0])
			case (op == "=" || op == "!=") && !strings.Contains(value, "$") && !slices.Contains(configLabels, label) && !values[value]:
				errorf("%s: %s{%s} has no value %q (values: %v) (in %s)", where, sel[1], label, value, sortedKeys(values), sel[0])
			}
		}
	}
	return names
}

func sortedKeys(m map[string]bool) []string {
	var k []string
	for v := range m {
		k = append(k, v)
	}
	slices.Sort(k)
	return k
}

// dashboardQueries returns the dashboard's PromQL expressions (panel
// targets, template variables, annotations), and every other string in
// it, titles and descriptions included.
func dashboardQueries(t *testing.T) (exprs []string, all string) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var text strings.Builder
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(k, x)
			}
		case []any:
			for _, x := range v {
				walk(key, x)
			}
		case string:
			text.WriteString(v + "\n")
			if key == "expr" {
				exprs = append(exprs, v)
			}
		}
	}
	walk("", d)
	return exprs, text.String()
}

func TestDashboardAndRulesNameRealSeries(t *testing.T) {
	s := exposed(t)
	exprs, text := dashboardQueries(t)
	if len(exprs) < 20 {
		t.Errorf("%s: %d expressions; the walk lost its way", dashboardFile, len(exprs))
	}
	if n := checkQueries(t.Errorf, dashboardFile, text, s); n < len(exprs) {
		t.Errorf("%s: %d series names in %d expressions", dashboardFile, n, len(exprs))
	}
	for _, f := range []string{rulesFile, rulesTestFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := checkQueries(t.Errorf, f, string(b), s); n < 9 {
			t.Errorf("%s: only %d series names", f, n)
		}
	}
}

// The check itself catches what it is for: a renamed series, a label the
// series lacks, a value it never takes.
func TestCheckQueriesCatchesRenames(t *testing.T) {
	s := exposed(t)
	for _, bad := range []string{
		`rate(tailgate_request_total[5m])`,                             // renamed series
		`tailgate_attempts_total{kind="hedge"}`,                        // no such label
		`tailgate_replica_attempts_total{outcome="slow"}`,              // no such value
		`histogram_quantile(0.9, tailgate_request_duration_seconds_x)`, // not a histogram's part
	} {
		var errs []string
		checkQueries(func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }, "test", bad, s)
		if len(errs) == 0 {
			t.Errorf("%s passed the check", bad)
		}
	}
	ok := `tailgate_request_duration_seconds_bucket{job=~"$job",le="0.1"} tailgate_requests_total{code!="0",instance=~"$instance"}`
	checkQueries(func(f string, a ...any) { t.Errorf("%s: "+f, append([]any{ok}, a...)...) }, "test", ok, s)
}

// Where promtool is installed (CI installs it), the dashboard's queries
// must parse: each becomes a recording rule of a rules file that promtool
// checks, with Grafana's variables replaced by values.
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed")
	}
	exprs, _ := dashboardQueries(t)
	vars := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$instance", ".*", "$replica", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(vars.Replace(e)) // a JSON string is a YAML string
		rules.WriteString("      - record: dashboard_query_" + strconv.Itoa(i) + "\n        expr: " + string(q) + "\n")
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}

// What an operator of the shipped Deployment (replicas found by DNS,
// -max-conns, https:// backends) needs on the dashboard and in the alerts
// is there: the discovered names, the connection limit, the 503s at the
// limits, TLS failures. The alerts' behaviour is promtool's to test
// (tailgate-rules.test.yml).
func TestOperationsCoverDiscoveryLimitsAndTLS(t *testing.T) {
	exprs, _ := dashboardQueries(t)
	all := strings.Join(exprs, "\n")
	for _, want := range []string{"tailgate_discovery_replicas", "tailgate_discovery_stale", "tailgate_discovery_errors_total",
		"tailgate_client_connections{", "tailgate_client_connections_max", "tailgate_client_connections_refused_total",
		"tailgate_attempt_failures_total", "tailgate_rejections_total"} {
		if !strings.Contains(all, want) {
			t.Errorf("%s: no query of %s", dashboardFile, want)
		}
	}
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	for alert, series := range map[string]string{
		"TailgateDiscoveryStale":             "tailgate_discovery_stale",
		"TailgateDiscoveryNoReplicas":        "tailgate_discovery_replicas",
		"TailgateClientConnectionsNearLimit": "tailgate_client_connections_max",
		"TailgateClientConnectionsRefused":   "tailgate_client_connections_refused_total",
		"TailgateRequestsRejected":           `tailgate_rejections_total{reason=~"max_requests|max_attempts"}`,
		"TailgateBackendTLSFailing":          `tailgate_attempt_failures_total{reason="tls"}`,
	} {
		rule := regexp.MustCompile(`(?s)- alert: ` + alert + `\n(.*?)(\n      - alert:|$)`).FindStringSubmatch(string(rules))
		if rule == nil || !strings.Contains(rule[1], series) {
			t.Errorf("%s: no alert %s on %s", rulesFile, alert, series)
		}
		if !strings.Contains(string(tests), "alertname: "+alert+"\n") {
			t.Errorf("%s: no unit test of %s", rulesTestFile, alert)
		}
	}
}
