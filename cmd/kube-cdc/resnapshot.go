package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/metrics"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/signal"
	"github.com/kube-cdc/kube-cdc/internal/status"
)

func newResnapshotCmd() *cobra.Command {
	var full bool
	var timeout time.Duration
	var output string
	cmd := configCommand("resnapshot [RESOURCE...]",
		"Ask the running kube-cdc (whichever replica leads) to relist and reconcile resources into every sink, and wait until it is written",
		func(cmd *cobra.Command, cfg *config.Config) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return resnapshot(ctx, cmd.OutOrStdout(), cfg, cmd.Flags().Args(), full, output)
		})
	cmd.Args = cobra.ArbitraryArgs
	cmd.Long = `Ask the running kube-cdc to relist the named resources (plural or plural.group, as
configured; every configured resource when none is named) and reconcile them into every
sink, without a restart: what the sinks hold as listed is not written again; what differs
(drift) is repaired. With --full every listed object is written again as a snapshot
(op "r" in Kafka and stdout; a changes row with snapshot=true in PostgreSQL where the
audit trail lacks one for that version), for a consumer that lost its state.

The request travels through the ConfigMap <leaderElection.name>-signals in
leaderElection.namespace (docs/architecture.md, "Signals"); whichever replica leads
answers it. The command prints, per sink and resource, what was listed, written and
deleted.`
	cmd.Flags().BoolVar(&full, "full", false, "write every listed object again as a snapshot, changed or not")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the answer")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func resnapshot(ctx context.Context, w io.Writer, cfg *config.Config, resources []string, full bool, output string) error {
	if output != "table" && output != "json" {
		return fmt.Errorf("--output: want table or json, got %q", output)
	}
	rc, err := restConfig(cfg.Kubernetes)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	ns, name := cfg.LeaderElection.Namespace, signal.ConfigMapName(cfg.LeaderElection.Name)
	res, err := signal.Ask(ctx, cs, ns, name, signal.Request{Resources: resources, Full: full})
	if err != nil {
		return err
	}
	scopes := configuredScopes(cfg)
	return res.Report(w, output, func(id string) string { return status.ScopeColumn(status.ScopeOf(scopes, id), id) })
}

// serveSignals answers resnapshot requests with p until ctx ends (run it while this
// process streams, i.e. leads). Without the RBAC to read and write the signal ConfigMap
// it says so once (a warning, m and `kube-cdc status`), serves nothing and asks again
// every kubernetes.accessCheckInterval: streaming goes on.
func serveSignals(ctx context.Context, cfg *config.Config, cs kubernetes.Interface, p *pipeline.Pipeline, log *slog.Logger, m *metrics.Metrics) {
	ns, name := cfg.LeaderElection.Namespace, signal.ConfigMapName(cfg.LeaderElection.Name)
	identity := cfg.LeaderElection.Identity
	if identity == "" {
		identity, _ = os.Hostname()
	}
	s := &signal.Server{Client: cs, Namespace: ns, Name: name, Identity: identity, Relister: pipelineRelister{p}, Log: log,
		Observer: m, Recheck: cfg.Kubernetes.AccessCheckInterval}
	err := s.Run(ctx)
	if err != nil && ctx.Err() == nil {
		log.Warn("not answering resnapshot requests", "configmap", ns+"/"+name, "error", err)
	}
}

// pipelineRelister is the pipeline as a signal.Relister.
type pipelineRelister struct{ p *pipeline.Pipeline }

func (r pipelineRelister) Relist(ctx context.Context, resources []string, full bool) ([]signal.Outcome, error) {
	rs, err := r.p.Relist(ctx, resources, full)
	out := make([]signal.Outcome, len(rs))
	for i, x := range rs {
		out[i] = signal.Outcome(x) // the same fields
	}
	return out, err
}
