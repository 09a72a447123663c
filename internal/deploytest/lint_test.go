package deploytest

import (
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// helm lint --strict, for the default values, the HA values and values streaming Secrets.
func TestChartLints(t *testing.T) {
	for _, file := range []string{"", "testdata/helm-ha.yaml", "testdata/helm-secrets.yaml"} {
		vals := map[string]any{}
		if file != "" {
			var err error
			if vals, err = chartutil.ReadValuesFile(file); err != nil {
				t.Fatal(err)
			}
		}
		res := lint.AllWithKubeVersion(chartDir, vals, "observability", nil)
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: %s", file, m)
			} else {
				t.Logf("%s: %s", file, m)
			}
		}
	}
}
