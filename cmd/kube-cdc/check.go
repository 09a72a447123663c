package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/check"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/signal"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

func newCheckCmd() *cobra.Command {
	var offline *bool
	cmd := configCommand("check", "Check the config, the apiserver, RBAC for every resource and every sink, as a table",
		func(cmd *cobra.Command, cfg *config.Config) error {
			t := check.NewTable(cmd.OutOrStdout())
			t.Row("config", "ok", fmt.Sprintf("%d resources, %d sinks", len(cfg.Resources), len(cfg.Sinks)))
			if !*offline {
				checkAll(cmd.Context(), cfg, t)
			}
			return t.Flush()
		})
	offline = cmd.Flags().Bool("offline", false, "only validate the config; connect to nothing")
	return cmd
}

func checkAll(ctx context.Context, cfg *config.Config, t *check.Table) {
	src, err := connectSource(cfg)
	if err != nil {
		t.Result("apiserver", err, "")
		return
	}
	v, err := src.clients.Discovery.ServerVersion()
	if err != nil {
		t.Result("apiserver", fmt.Errorf("%s: %w", src.rest.Host, err), "")
		return
	}
	t.Result("apiserver", nil, src.rest.Host+" "+v.GitVersion)
	checkIdentity(ctx, src, t)

	// As run resolves them: a name a CRD could serve later is a target that waits. check
	// still fails its row (the resource does not stream until its CRD is installed), and
	// checks the others.
	targets, err := source.ResolveOrWait(src.clients.Discovery, sourceSpecs(cfg))
	var served, all []change.Resource // served: each once, for the sinks' per-resource checks
	for _, tg := range targets {
		all = append(all, tg.Resource)
		if !tg.Waiting && !slices.ContainsFunc(served, func(r change.Resource) bool { return r.ID() == tg.Resource.ID() }) {
			served = append(served, tg.Resource)
		}
	}
	if err != nil {
		t.Result("resources", err, "")
	} else if cs, err := kubernetes.NewForConfig(src.rest); err != nil {
		t.Result("rbac", err, "")
	} else {
		for _, tg := range targets {
			if tg.Waiting {
				t.Result("resource "+tg.Resource.ID(), fmt.Errorf("not served: the apiserver does not serve %s (is its CRD installed?); run waits for it", tg.Resource.ID()), "")
				continue
			}
			detail, err := source.CheckAccess(ctx, cs, tg)
			t.Result("resource "+tg.Resource.ID(), err, detail)
		}
		checkSignals(ctx, cfg, cs, t)
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, sc := range cfg.Sinks {
		if sc.Type == config.SinkPostgres {
			check.Postgres(ctx, t, cfg, sc, hasIgnorePaths(cfg, targets), all) // run writes history_skipped, events then
			continue
		}
		detail, err := checkStoreSink(ctx, cfg, sc, quiet)
		t.Result("sink "+sc.Name, err, detail)
		if err == nil && sc.Type == config.SinkKafka {
			check.DeadLetters(ctx, t, cfg, sc, served)
		}
	}
	check.Audit(ctx, t, cfg)
}

// checkIdentity reports the cluster's identity as run reads it (the kube-system
// namespace's uid), which every PostgreSQL checkpoint carries to find a cluster rebuilt
// under the same name. Without it run still streams, relying on resource versions alone:
// a warning, not a failure.
func checkIdentity(ctx context.Context, src *kubeSource, t *check.Table) {
	uid, err := source.ClusterIdentity(ctx, src.clients)
	switch {
	case err != nil:
		t.Row("cluster identity", "warn", fmt.Sprintf("cannot read the kube-system namespace (%s); a cluster rebuilt under the same name is found only by its resource versions (grant list on namespaces)", err))
	case uid == "":
		t.Row("cluster identity", "warn", "no kube-system namespace; a cluster rebuilt under the same name is found only by its resource versions")
	default:
		t.Row("cluster identity", "ok", "kube-system uid "+uid)
	}
}

// checkSignals is the row of the signal ConfigMap (resnapshot requests): a warning, not a
// failure, when the daemon may not read and write it, since the data streams without it.
func checkSignals(ctx context.Context, cfg *config.Config, cs kubernetes.Interface, t *check.Table) {
	ns, name := cfg.LeaderElection.Namespace, signal.ConfigMapName(cfg.LeaderElection.Name)
	a, err := signal.ReviewAccess(ctx, cs, ns, name)
	switch {
	case err != nil:
		t.Result("signals", err, "")
	case len(a.Denied) > 0:
		t.Row("signals", "warn", signal.Denial(a, ns, name))
	default:
		t.Row("signals", "ok", fmt.Sprintf("%s allowed on configmaps/%s %s (resnapshot requests)", strings.Join(signal.ServeVerbs, ", "), name, a.Where))
	}
}

// checkStoreSink checks a sink that keeps its checkpoints in a store (Kafka, stdout) as
// run opens it, but a file store without its writer lock, which the running kube-cdc
// holds (checkpoint.CheckFile): opening it for writing would wait, then fail, beside the
// daemon whose configuration is being checked.
func checkStoreSink(ctx context.Context, cfg *config.Config, sc config.Sink, log *slog.Logger) (string, error) {
	if !strings.EqualFold(sc.Checkpoint.Type, checkpoint.TypeFile) {
		s, err := openSink(ctx, cfg, sc, log)
		if err != nil {
			return "", err
		}
		return sc.Type + " reachable", s.Close()
	}
	path := sc.Checkpoint.Path
	if path == "" {
		path = checkpoint.DefaultPath
	}
	file, err := checkpoint.CheckFile(path)
	if err != nil {
		return "", fmt.Errorf("sink %s: checkpoint: %w", sc.Name, err) // as run says it
	}
	if sc.Type == config.SinkKafka {
		s, err := kafka.New(ctx, sc.Name, cfg.Cluster, *sc.Kafka, checkpoint.None{}, log) // the brokers alone
		if err != nil {
			return "", err
		}
		if err := s.Close(); err != nil {
			return "", err
		}
	}
	return sc.Type + " reachable; " + file, nil
}
