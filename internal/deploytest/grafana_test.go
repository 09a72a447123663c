package deploytest

import (
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/metrics"
)

// servedSeries is every kube_cdc_ series name /metrics serves once each method was called.
func servedSeries(t *testing.T) map[string]bool {
	m := metrics.New()
	m.Changes("s", "r", "create", 1)
	m.BatchWritten("s", "r", 1, time.Millisecond)
	m.Lag("s", "r", time.Millisecond)
	m.Relist("r")
	m.RelistStarted("r", "gone", "stream")
	m.RelistListed("r", 1)
	m.Drift("s", "r", "edited", 1)
	m.Gone("r")
	m.WatchRestart("r")
	m.SinkError("s", metrics.ClassRetryable)
	m.Checkpoint("s", "r", 1, time.Now())
	m.KeyIndexSize("s", "r", 1)
	m.Quarantined("s", "r", 1)
	m.TimeTravel("s", "r", "list-below-checkpoint")
	m.Degraded("r", "", "forbidden", "x", time.Now())
	m.AccessDenied("r", "", []string{"watch"}, "x", time.Now())
	m.SignalsDenied("ns/n", []string{"get"}, "x", time.Now())
	m.ConcurrentWriters("s", 0)
	m.HistorySkipped("s", "r", 1)
	m.AuditRequest("stored", map[string]int{"kept": 1})
	m.AuditJoin(map[string]int64{"exact": 1})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	names := map[string]bool{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "kube_cdc_") {
			name := line[:strings.IndexAny(line, "{ ")]
			names[name] = true
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok {
					names[base] = true // a histogram is named without its suffix in prose
				}
			}
		}
	}
	return names
}

var seriesRef = regexp.MustCompile(`kube_cdc_[a-z_]+`)

// checkSeries fails for every kube_cdc_ name in text that /metrics does not serve.
func checkSeries(t *testing.T, where, text string, served map[string]bool) int {
	t.Helper()
	n := 0
	for _, name := range seriesRef.FindAllString(text, -1) {
		name = strings.TrimSuffix(name, "_")
		n++
		if !served[name] {
			t.Errorf("%s uses %s, which kube-cdc does not serve", where, name)
		}
	}
	return n
}

func TestGrafanaDashboardQueriesServedSeries(t *testing.T) {
	var dash struct {
		Title  string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal([]byte(readFile(t, "../../deploy/grafana/kube-cdc.json")), &dash); err != nil {
		t.Fatal(err)
	}
	served := servedSeries(t)
	titles := ""
	for _, p := range dash.Panels {
		titles += p.Title + "\n"
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if checkSeries(t, "panel "+p.Title, tg.Expr, served) == 0 {
				t.Errorf("panel %q: %q queries no kube_cdc_ series", p.Title, tg.Expr)
			}
		}
	}
	for _, want := range []string{"Lag p99", "Changes/s by resource and sink", "Relists and 410", "Sink errors", "Checkpoint age", "Key index size"} {
		if !strings.Contains(titles, want) {
			t.Errorf("no panel %q", want)
		}
	}
}

func TestOperationsDocQueriesServedSeries(t *testing.T) {
	if n := checkSeries(t, "docs/operations.md", readFile(t, "../../docs/operations.md"), servedSeries(t)); n < 5 {
		t.Errorf("docs/operations.md names only %d series", n)
	}
}
