package main

import (
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/leader"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// config may not import the packages behind the kubernetes and leaderElection keys (they
// import client-go), so it spells their defaults out; the command, which wires both,
// holds them to the packages' own.
func TestTheKubernetesAndLeaderElectionDefaultsAreTheSourcesAndTheLeaders(t *testing.T) {
	cfg, err := config.Load(config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	for key, c := range map[string]struct{ got, want any }{
		"kubernetes.pageSize":          {cfg.Kubernetes.PageSize, int64(source.DefaultPageSize)},
		"kubernetes.listMode":          {cfg.Kubernetes.ListMode, string(source.ListAuto)},
		"leaderElection.leaseDuration": {cfg.LeaderElection.LeaseDuration, leader.DefaultLeaseDuration},
		"leaderElection.renewDeadline": {cfg.LeaderElection.RenewDeadline, leader.DefaultRenewDeadline},
		"leaderElection.retryPeriod":   {cfg.LeaderElection.RetryPeriod, leader.DefaultRetryPeriod},
	} {
		if c.got != c.want {
			t.Errorf("config's default of %s is %v (%T), the package's %v (%T)", key, c.got, c.got, c.want, c.want)
		}
	}
}
