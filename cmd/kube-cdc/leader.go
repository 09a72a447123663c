package main

import (
	"context"
	"log/slog"

	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/leader"
)

// lead runs stream only while this replica holds the Lease. Losing it ends the process
// with an error (the orchestrator restarts it as a standby), so a deposed leader never
// keeps streaming; the sinks' RV guards make any write still in flight harmless.
func lead(ctx context.Context, cs kubernetes.Interface, cfg *config.Config, log *slog.Logger, stream func(context.Context) error) error {
	le := cfg.LeaderElection
	return leader.Run(ctx, cs, leader.Options{
		Namespace:     le.Namespace,
		Name:          le.Name,
		Identity:      le.Identity,
		LeaseDuration: le.LeaseDuration,
		RenewDeadline: le.RenewDeadline,
		RetryPeriod:   le.RetryPeriod,
	}, log, stream)
}
