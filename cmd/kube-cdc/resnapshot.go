package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/signal"
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
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		printOutcomes(w, res, configuredScopes(cfg))
	}
	if res.State == signal.StateFailed {
		return fmt.Errorf("resnapshot failed (answered by %s): %s", res.By, res.Error)
	}
	return nil
}

// printOutcomes prints res's outcomes as a table, their scopes by content as status shows
// them, and who answered; nothing at all for a failed request without outcomes, whose
// error (on stderr) says everything there is.
func printOutcomes(w io.Writer, res signal.Result, scopes map[string]scopeContent) {
	answered := fmt.Sprintf("answered by %s in %s\n", res.By, res.Finished.Sub(res.Started).Round(time.Millisecond))
	switch {
	case len(res.Outcomes) > 0:
	case res.State == signal.StateFailed:
		return
	default:
		io.WriteString(w, answered)
		return
	}
	scope := func(o signal.Outcome) string { return scopeColumn(scopeOf(scopes, o.Scope), o.Scope) }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SINK\tRESOURCE\tSCOPE\tLISTED\tWRITTEN\tDELETED\tDRIFT")
	out := slices.Clone(res.Outcomes)
	slices.SortFunc(out, func(a, b signal.Outcome) int {
		return strings.Compare(a.Sink+"\x00"+a.Resource+"\x00"+scope(a), b.Sink+"\x00"+b.Resource+"\x00"+scope(b))
	})
	for _, o := range out {
		if o.Skipped != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\tskipped: %s\n", o.Sink, o.Resource, scope(o), o.Skipped)
			continue
		}
		var drift []string
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range o.Drift {
				if !yield(k) {
					return
				}
			}
		}) {
			drift = append(drift, fmt.Sprintf("%s=%d", k, o.Drift[k]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", o.Sink, o.Resource, scope(o), o.Listed, o.Written, o.Deleted, dash(strings.Join(drift, ",")))
	}
	tw.Flush()
	io.WriteString(w, answered)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// serveSignals answers resnapshot requests with p until ctx ends (run it while this
// process streams, i.e. leads). Without the RBAC to read the signal ConfigMap it says so
// once and serves nothing: streaming goes on.
func serveSignals(ctx context.Context, cfg *config.Config, cs kubernetes.Interface, p *pipeline.Pipeline, log *slog.Logger) {
	ns, name := cfg.LeaderElection.Namespace, signal.ConfigMapName(cfg.LeaderElection.Name)
	identity := cfg.LeaderElection.Identity
	if identity == "" {
		identity, _ = os.Hostname()
	}
	err := signal.Serve(ctx, cs, ns, name, identity, pipelineRelister{p}, log)
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
		out[i] = signal.Outcome{Sink: x.Sink, Resource: x.Resource, Scope: x.Scope, Listed: x.Listed, Written: x.Written,
			Deleted: x.Deleted, Drift: x.Drift, Skipped: x.Skipped}
	}
	return out, err
}
