package metrics

import (
	"strings"
	"testing"
)

func TestQuarantinedCountsPerSinkAndResource(t *testing.T) {
	m := New()
	m.Quarantined("pg", "configmaps", 2)
	m.Quarantined("pg", "configmaps", 1)
	m.Quarantined("pg", "secrets", 0) // nothing: no series
	var nilMetrics *Metrics
	nilMetrics.Quarantined("pg", "configmaps", 1) // a no-op, no panic

	text := scrape(t, m.Handler())
	if want := `kube_cdc_quarantined_total{resource="configmaps",sink="pg"} 3`; !strings.Contains(text, want) {
		t.Errorf("scrape lacks %s", want)
	}
	if strings.Contains(text, `kube_cdc_quarantined_total{resource="secrets"`) {
		t.Error("a count of 0 made a series")
	}
}

func TestHistorySkippedCountsPerSinkAndResource(t *testing.T) {
	m := New()
	m.HistorySkipped("pg", "nodes", 2)
	m.HistorySkipped("pg", "nodes", 3)
	m.HistorySkipped("pg", "pods", 0)
	var nilMetrics *Metrics
	nilMetrics.HistorySkipped("pg", "nodes", 1)
	text := scrape(t, m.Handler())
	if want := `kube_cdc_history_skipped_total{resource="nodes",sink="pg"} 5`; !strings.Contains(text, want) {
		t.Errorf("scrape lacks %s", want)
	}
	if strings.Contains(text, `kube_cdc_history_skipped_total{resource="pods"`) {
		t.Error("a count of 0 made a series")
	}
}
