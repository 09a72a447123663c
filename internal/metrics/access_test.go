package metrics

import (
	"strings"
	"testing"
	"time"
)

func TestAResourceWhoseAccessWasRevokedIsOneSeriesPerVerbDeniedUntilItIsAllowedAgain(t *testing.T) {
	m := New()
	if a := resources(t, m); a.AccessDenied == nil || len(a.AccessDenied) != 0 {
		t.Errorf("/resources before any denial: accessDenied %v, want []", a.AccessDenied)
	}
	since := time.Unix(1_700_000_000, 0).UTC()
	m.AccessDenied("configmaps", "ab12cd", []string{"list", "watch"}, "list, watch configmaps not allowed in namespace shop", since)
	m.AccessDenied("pods", "", []string{"watch"}, "watch pods not allowed cluster-wide", since)

	text := scrape(t, m.Handler())
	for _, want := range []string{
		`kube_cdc_resource_access_denied{resource="configmaps",scope="ab12cd",verb="list"} 1`,
		`kube_cdc_resource_access_denied{resource="configmaps",scope="ab12cd",verb="watch"} 1`,
		`kube_cdc_resource_access_denied{resource="pods",scope="",verb="watch"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in:\n%s", want, text)
		}
	}
	a := resources(t, m)
	if len(a.AccessDenied) != 2 || a.AccessDenied[0].Resource != "configmaps" || len(a.AccessDenied[0].Denied) != 2 ||
		a.AccessDenied[1].Error != "watch pods not allowed cluster-wide" || !a.AccessDenied[1].Since.Equal(since) {
		t.Errorf("/resources: %+v, want configmaps (list, watch) and pods (watch, with its error and since)", a.AccessDenied)
	}
	if len(a.Degraded) != 0 {
		t.Errorf("/resources: degraded %+v; a resource whose access was revoked still streams", a.Degraded)
	}

	// Once the re-watch failed and pods degraded, /resources names it among the degraded
	// only; the gauge still says what is denied.
	m.Degraded("pods", "", "forbidden", "pods is forbidden", since)
	if a := resources(t, m); len(a.AccessDenied) != 1 || a.AccessDenied[0].Resource != "configmaps" || len(a.Degraded) != 1 {
		t.Errorf("/resources after pods degraded: accessDenied %+v, degraded %+v; want configmaps, and pods degraded", a.AccessDenied, a.Degraded)
	}
	if text := scrape(t, m.Handler()); !strings.Contains(text, `kube_cdc_resource_access_denied{resource="pods",scope="",verb="watch"} 1`) {
		t.Errorf("the gauge of pods' denied watch went when pods degraded:\n%s", text)
	}
	m.Degraded("pods", "", "", "", time.Time{})

	// list allowed again, watch still denied: only the watch series stays.
	m.AccessDenied("configmaps", "ab12cd", []string{"watch"}, "watch configmaps not allowed in namespace shop", since)
	text = scrape(t, m.Handler())
	if strings.Contains(text, `verb="list"`) || !strings.Contains(text, `kube_cdc_resource_access_denied{resource="configmaps",scope="ab12cd",verb="watch"} 1`) {
		t.Errorf("after list was allowed again:\n%s", text)
	}

	m.AccessDenied("configmaps", "ab12cd", nil, "", time.Time{})
	m.AccessDenied("pods", "", nil, "", time.Time{})
	if text := scrape(t, m.Handler()); strings.Contains(text, "kube_cdc_resource_access_denied{") {
		t.Errorf("series still served after every verb was allowed again:\n%s", text)
	}
	if a := resources(t, m); len(a.AccessDenied) != 0 {
		t.Errorf("/resources after every verb was allowed again: %+v", a.AccessDenied)
	}
}

func TestASignalConfigMapTheLeaderMayNotUseIsOneSeriesPerVerbAndInResourcesUntilAllowedAgain(t *testing.T) {
	m := New()
	if a := resources(t, m); a.SignalsDenied != nil {
		t.Errorf("/resources before any denial: signalsDenied %+v, want null", a.SignalsDenied)
	}
	since := time.Unix(1_700_000_000, 0).UTC()
	m.SignalsDenied("ops/kube-cdc-signals", []string{"get", "update"}, "get, update configmaps/kube-cdc-signals not allowed", since)
	text := scrape(t, m.Handler())
	for _, want := range []string{
		`kube_cdc_signals_access_denied{configmap="ops/kube-cdc-signals",verb="get"} 1`,
		`kube_cdc_signals_access_denied{configmap="ops/kube-cdc-signals",verb="update"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in:\n%s", want, text)
		}
	}
	if a := resources(t, m); a.SignalsDenied == nil || a.SignalsDenied.ConfigMap != "ops/kube-cdc-signals" || len(a.SignalsDenied.Denied) != 2 ||
		!a.SignalsDenied.Since.Equal(since) || a.SignalsDenied.Error == "" {
		t.Errorf("/resources: signalsDenied %+v", a.SignalsDenied)
	}

	// update allowed again: only get's series stays.
	m.SignalsDenied("ops/kube-cdc-signals", []string{"get"}, "get configmaps/kube-cdc-signals not allowed", since)
	if text := scrape(t, m.Handler()); strings.Contains(text, `verb="update"`) || !strings.Contains(text, `verb="get"} 1`) {
		t.Errorf("after update was allowed again:\n%s", text)
	}
	m.SignalsDenied("ops/kube-cdc-signals", nil, "", time.Time{})
	if text := scrape(t, m.Handler()); strings.Contains(text, "kube_cdc_signals_access_denied{") {
		t.Errorf("series still served after every verb was allowed again:\n%s", text)
	}
	if a := resources(t, m); a.SignalsDenied != nil {
		t.Errorf("/resources after every verb was allowed again: %+v", a.SignalsDenied)
	}
}
