package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// newestRelease is CHANGELOG.md's newest released version (its first "## [X.Y.Z]").
func newestRelease(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\]`).FindSubmatch(data)
	if m == nil {
		t.Fatal(`CHANGELOG.md has no released entry ("## [X.Y.Z] - date")`)
	}
	return string(m[1])
}

// A release sets the chart's version and appVersion (RELEASING.md); the default image is
// the release's.
func TestTheChartAndItsDefaultImageAreTheNewestReleases(t *testing.T) {
	release := newestRelease(t)
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion != release || chart.Version != release {
		t.Errorf("Chart.yaml: version %q, appVersion %q; CHANGELOG.md's newest release is %s (RELEASING.md: set both)", chart.Version, chart.AppVersion, release)
	}
	d := into[appsv1.Deployment](t, render(t, ""), "Deployment", "cdc-kube-cdc")
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "kube-cdc:"+release {
		t.Errorf("the chart's default image is %q, want kube-cdc:%s", got, release)
	}
}
