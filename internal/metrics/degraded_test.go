package metrics

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func resources(t *testing.T, m *Metrics) ResourcesAnswer {
	t.Helper()
	rec := httptest.NewRecorder()
	Mux(m, nil, false).ServeHTTP(rec, httptest.NewRequest("GET", "/resources", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /resources: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var a ResourcesAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatalf("GET /resources: %v: %s", err, rec.Body)
	}
	if a.Degraded == nil {
		t.Errorf("GET /resources: degraded is null: %s", rec.Body)
	}
	return a
}

func TestADegradedResourceIsOneSeriesWithItsCurrentReasonUntilItStreamsAgain(t *testing.T) {
	m := New()
	if text := scrape(t, m.Handler()); !strings.Contains(text, "kube_cdc_degraded_resources 0") {
		t.Errorf("kube_cdc_degraded_resources is not served as 0 before anything degrades:\n%s", text)
	}
	since := time.Unix(1_700_000_000, 0).UTC()
	m.Degraded("widgets.example.com", "", "not served", "resource widgets.example.com: not served", since)
	m.Degraded("configmaps", "ab12cd", "forbidden", "configmaps is forbidden", since)
	m.Degraded("widgets.example.com", "", "forbidden", "widgets.example.com is forbidden", since) // the reason changed

	text := scrape(t, m.Handler())
	for _, want := range []string{
		`kube_cdc_resource_degraded{reason="forbidden",resource="widgets.example.com",scope=""} 1`,
		`kube_cdc_resource_degraded{reason="forbidden",resource="configmaps",scope="ab12cd"} 1`,
		"kube_cdc_degraded_resources 2",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in:\n%s", want, text)
		}
	}
	if strings.Contains(text, `reason="not served"`) {
		t.Errorf("the old reason's series is still served:\n%s", text)
	}
	a := resources(t, m)
	if len(a.Degraded) != 2 || a.Degraded[0].Resource != "configmaps" || a.Degraded[1].Reason != "forbidden" ||
		a.Degraded[1].Error != "widgets.example.com is forbidden" || !a.Degraded[1].Since.Equal(since) {
		t.Errorf("/resources: %+v, want configmaps and widgets (forbidden, with its error and since)", a.Degraded)
	}

	m.Degraded("widgets.example.com", "", "", "", time.Time{})
	m.Degraded("configmaps", "ab12cd", "", "", time.Time{})
	text = scrape(t, m.Handler())
	if strings.Contains(text, "kube_cdc_resource_degraded{") || !strings.Contains(text, "kube_cdc_degraded_resources 0") {
		t.Errorf("after both recovered:\n%s", text)
	}
	if a := resources(t, m); len(a.Degraded) != 0 {
		t.Errorf("/resources after both recovered: %+v", a.Degraded)
	}
}

func TestANilMetricsServesNoDegradedResources(t *testing.T) {
	var m *Metrics
	m.Degraded("r", "", "forbidden", "x", time.Now())
	if a := resources(t, m); len(a.Degraded) != 0 {
		t.Errorf("/resources of a nil Metrics: %+v", a.Degraded)
	}
}

// A standby (or a process still starting) runs no pipeline, so its empty list of degraded
// resources means nothing: /resources and kube_cdc_streaming say so.
func TestResourcesSaysWhetherTheProcessStreams(t *testing.T) {
	m := New()
	if a := resources(t, m); a.Streaming {
		t.Errorf("/resources of a process that never streamed: %+v", a)
	}
	if text := scrape(t, m.Handler()); !strings.Contains(text, "kube_cdc_streaming 0\n") {
		t.Errorf("kube_cdc_streaming is not 0 before the pipeline runs:\n%s", text)
	}
	m.Streaming(true)
	if a := resources(t, m); !a.Streaming {
		t.Errorf("/resources while streaming: %+v", a)
	}
	if text := scrape(t, m.Handler()); !strings.Contains(text, "kube_cdc_streaming 1\n") {
		t.Errorf("kube_cdc_streaming is not 1 while streaming:\n%s", text)
	}
	m.Streaming(false) // the lease lost
	if a := resources(t, m); a.Streaming {
		t.Errorf("/resources after the pipeline stopped: %+v", a)
	}
}
