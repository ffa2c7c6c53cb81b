// Package promtext reads a gateway's admin /metrics for the bench tools:
// every sample of the Prometheus text format, keyed by its series as
// exposed (`name{label="v"}`).
package promtext

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Metrics are the samples of one scrape, by series.
type Metrics map[string]float64

// Scrape reads http://admin/metrics, with a 5s limit.
func Scrape(admin string) (Metrics, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: %s", admin, resp.Status)
	}
	m := Metrics{}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		l := lines.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			m[l[:i]] = v
		}
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("%s/metrics: %w", admin, err)
	}
	return m, nil
}

// Sum adds up every series of the metric name, whatever its labels.
func (m Metrics) Sum(name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

// SumWith adds up the series of the metric name that carry the label
// pair (`role="hedge"`), whatever their other labels: the gateway's read
// series carry a route label beside their own.
func (m Metrics) SumWith(name, pair string) float64 {
	var s float64
	for k, v := range m {
		if labels, ok := strings.CutPrefix(k, name+"{"); ok && hasPair(strings.TrimSuffix(labels, "}"), pair) {
			s += v
		}
	}
	return s
}

// ByLabel adds up the series of the metric name by the value of their
// label (series without it are left out).
func (m Metrics) ByLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		labels, ok := strings.CutPrefix(k, name+"{")
		if !ok {
			continue
		}
		for _, p := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if val, ok := strings.CutPrefix(p, label+`="`); ok {
				out[strings.TrimSuffix(val, `"`)] += v
			}
		}
	}
	return out
}

// hasPair reports whether labels (`a="1",b="2"`) hold pair.
func hasPair(labels, pair string) bool {
	for _, p := range strings.Split(labels, ",") {
		if p == pair {
			return true
		}
	}
	return false
}
