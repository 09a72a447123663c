package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/signal"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

func newCheckCmd() *cobra.Command {
	var offline *bool
	cmd := configCommand("check", "Check the config, the apiserver, RBAC for every resource and every sink, as a table",
		func(cmd *cobra.Command, cfg *config.Config) error {
			t := &table{w: tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)}
			t.row("config", "ok", fmt.Sprintf("%d resources, %d sinks", len(cfg.Resources), len(cfg.Sinks)))
			if !*offline {
				check(cmd.Context(), cfg, t)
			}
			t.w.Flush()
			if t.failed > 0 {
				return fmt.Errorf("check: %d of %d checks failed", t.failed, t.rows)
			}
			return nil
		})
	offline = cmd.Flags().Bool("offline", false, "only validate the config; connect to nothing")
	return cmd
}

type table struct {
	w            *tabwriter.Writer
	rows, failed int
}

func (t *table) row(what, status, detail string) {
	if t.rows == 0 {
		fmt.Fprintln(t.w, "CHECK\tSTATUS\tDETAIL")
	}
	t.rows++
	fmt.Fprintf(t.w, "%s\t%s\t%s\n", what, status, detail)
}

func (t *table) result(what string, err error, ok string) {
	if err != nil {
		t.failed++
		// One line per check: drivers' messages sometimes carry newlines.
		t.row(what, "FAIL", strings.Join(strings.Fields(err.Error()), " "))
		return
	}
	t.row(what, "ok", ok)
}

func check(ctx context.Context, cfg *config.Config, t *table) {
	src, err := connectSource(cfg)
	if err != nil {
		t.result("apiserver", err, "")
		return
	}
	v, err := src.clients.Discovery.ServerVersion()
	if err != nil {
		t.result("apiserver", fmt.Errorf("%s: %w", src.rest.Host, err), "")
		return
	}
	t.result("apiserver", nil, src.rest.Host+" "+v.GitVersion)
	checkIdentity(ctx, src, t)

	// As run resolves them: a name a CRD could serve later is a target that waits. check
	// still fails its row (the resource does not stream until its CRD is installed), and
	// checks the others.
	targets, err := source.ResolveOrWait(src.clients.Discovery, sourceSpecs(cfg))
	var served []change.Resource // each once, for the sinks' per-resource checks
	for _, tg := range targets {
		if !tg.Waiting && !slices.ContainsFunc(served, func(r change.Resource) bool { return r.ID() == tg.Resource.ID() }) {
			served = append(served, tg.Resource)
		}
	}
	if err != nil {
		t.result("resources", err, "")
	} else if cs, err := kubernetes.NewForConfig(src.rest); err != nil {
		t.result("rbac", err, "")
	} else {
		for _, tg := range targets {
			if tg.Waiting {
				t.result("resource "+tg.Resource.ID(), fmt.Errorf("not served: the apiserver does not serve %s (is its CRD installed?); run waits for it", tg.Resource.ID()), "")
				continue
			}
			detail, err := source.CheckAccess(ctx, cs, tg)
			t.result("resource "+tg.Resource.ID(), err, detail)
		}
		checkSignals(ctx, cfg, cs, t)
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, sc := range cfg.Sinks {
		if sc.Type == config.SinkPostgres {
			o := *sc.Postgres
			o.Noise = hasIgnorePaths(cfg, targets)   // run writes history_skipped then
			o.StreamsEvents = streamsEvents(targets) // run writes events then
			detail, err := postgres.Check(ctx, sc.Name, cfg.Cluster, o, quiet)
			t.result("sink "+sc.Name, err, detail)
			continue
		}
		detail, err := checkStoreSink(ctx, cfg, sc, quiet)
		t.result("sink "+sc.Name, err, detail)
		if err == nil && sc.Type == config.SinkKafka {
			checkDeadLetters(ctx, cfg, sc, served, t)
		}
	}
	checkAudit(ctx, cfg, t)
}

// checkSignals is the row of the signal ConfigMap (resnapshot requests): a warning, not a
// failure, when the daemon may not read and write it, since the data streams without it.
func checkSignals(ctx context.Context, cfg *config.Config, cs kubernetes.Interface, t *table) {
	ns, name := cfg.LeaderElection.Namespace, signal.ConfigMapName(cfg.LeaderElection.Name)
	a, err := signal.ReviewAccess(ctx, cs, ns, name)
	switch {
	case err != nil:
		t.result("signals", err, "")
	case len(a.Denied) > 0:
		t.row("signals", "warn", signal.Denial(a, ns, name))
	default:
		t.row("signals", "ok", fmt.Sprintf("%s allowed on configmaps/%s %s (resnapshot requests)", strings.Join(signal.ServeVerbs, ", "), name, a.Where))
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

// streamsEvents reports whether a target is Kubernetes Events (core/v1 or
// events.k8s.io/v1), which a PostgreSQL sink writes to its events table.
func streamsEvents(targets []source.Target) bool {
	for _, t := range targets {
		if t.Resource.Resource == "events" && (t.Resource.Group == "" || t.Resource.Group == "events.k8s.io") {
			return true
		}
	}
	return false
}
