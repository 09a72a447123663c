package config

import (
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/leader"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// config may not import the packages behind the kubernetes and leaderElection keys (they
// import client-go), so defaults() spells their defaults out; its test may, and holds
// them to the packages' own.
func TestTheKubernetesAndLeaderElectionDefaultsAreTheSourcesAndTheLeaders(t *testing.T) {
	d := defaults()
	for key, want := range map[string]any{
		"kubernetes.pageSize":          source.DefaultPageSize,
		"kubernetes.listMode":          string(source.ListAuto),
		"leaderElection.leaseDuration": leader.DefaultLeaseDuration,
		"leaderElection.renewDeadline": leader.DefaultRenewDeadline,
		"leaderElection.retryPeriod":   leader.DefaultRetryPeriod,
	} {
		if d[key] != want {
			t.Errorf("config's default of %s is %v (%T), the package's %v (%T)", key, d[key], d[key], want, want)
		}
	}
}
