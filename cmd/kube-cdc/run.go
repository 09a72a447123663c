package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kube-cdc/kube-cdc/internal/audit/deliver"
	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
	"github.com/kube-cdc/kube-cdc/internal/leader"
	"github.com/kube-cdc/kube-cdc/internal/metrics"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/read/ui"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/writerlock"
	"github.com/kube-cdc/kube-cdc/internal/source"
	"github.com/kube-cdc/kube-cdc/internal/status"
	"github.com/kube-cdc/kube-cdc/internal/version"
)

func newRunCmd() *cobra.Command {
	var opts runOptions
	cmd := configCommand("run", "Stream the configured resources into the configured sinks until SIGTERM",
		func(cmd *cobra.Command, cfg *config.Config) error { return run(cmd.Context(), cfg, opts) })
	cmd.Flags().BoolVar(&opts.wait, "wait", false,
		"when another kube-cdc writes a PostgreSQL sink of this config, wait to take over when it stops instead of refusing to start")
	return cmd
}

// runOptions are run's flags that are not configuration.
type runOptions struct {
	wait bool // wait for another process's writer lock instead of refusing to start
}

// run is `kube-cdc run`: it resolves the resources, opens the sinks and streams until ctx
// ends (SIGTERM), then flushes and returns nil.
func run(ctx context.Context, cfg *config.Config, opts runOptions) error {
	log := cfg.Log.Logger(os.Stderr)
	// client-go logs through klog (retry watchers, leader election, reflectors); route it
	// through the same handler so --log-format json holds for every line.
	klog.SetSlogLogger(log.With("logger", "client-go"))
	log.Info("starting kube-cdc", "version", version.String(), "cluster", cfg.Cluster,
		"resources", len(cfg.Resources), "sinks", len(cfg.Sinks))
	m := metrics.New()

	src, err := connectSource(cfg)
	if err != nil {
		return err
	}
	// A name a CRD could serve later waits for it (degraded, "not served") instead of
	// failing the start; every other unknown name is a mistake and fails it.
	targets, err := source.ResolveOrWait(src.clients.Discovery, sourceSpecs(cfg))
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(src.rest)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if err := source.MayStream(ctx, cs, targets, log); err != nil {
		return err
	}
	resolution := source.NewResolution(src.clients, targets, log)
	// CRDs of the configured resources are watched (when RBAC allows) so that a resource
	// waiting for its CRD is streamed as soon as the CRD is created, not at its next retry.
	crds := &source.CRDWatch{Clients: src.clients, Resources: source.ForCRDs(targets), Log: log}

	var running atomic.Pointer[pipeline.Pipeline]
	ready := func() error {
		p := running.Load()
		switch {
		case p != nil:
			return p.Ready()
		case cfg.LeaderElection.Enabled:
			// A standby is ready: it has nothing to sync until it leads, and a rolling
			// update or a PodDisruptionBudget must be able to count it.
			return nil
		}
		return errors.New("starting")
	}
	g, gctx := errgroup.WithContext(ctx)
	serveMetrics := func(ln net.Listener) {
		g.Go(func() error { return metrics.ServeListener(gctx, ln, m, ready, cfg.Metrics.Pprof, log) })
	}
	// The endpoint is bound now, or once this process may stream when a kube-cdc it may
	// stand by for holds the address (metrics.ListenOrLater).
	var metricsWhenStreaming func(context.Context) error
	if addr := cfg.Metrics.Address; addr != "" {
		grace := time.Duration(0)
		if opts.wait || cfg.LeaderElection.Enabled {
			grace = metrics.TakeoverGrace
		}
		ln, later, err := metrics.ListenOrLater(ctx, addr, status.Answers, grace, log)
		if err != nil {
			return err
		}
		if ln != nil {
			serveMetrics(ln)
		}
		if later != nil {
			metricsWhenStreaming = func(ctx context.Context) error {
				ln, err := later(ctx)
				if err == nil {
					serveMetrics(ln)
				}
				return err
			}
		}
	}
	if len(crds.Resources) > 0 {
		g.Go(func() error { return crds.Run(gctx) })
	}
	if cfg.UI.Address != "" {
		h, closeUI, err := newUIHandler(ctx, cfg, log, false)
		if err != nil {
			return err
		}
		g.Go(func() error {
			defer closeUI()
			return ui.Serve(gctx, cfg.UI.Address, h, func(bound string) { log.Info("serving the web UI", "url", "http://"+bound+"/") })
		})
	}
	// The audit inputs run whether this process leads or stands by (audit.go).
	var actors envelope.Actors
	if cfg.Audit.Webhook.Listen != "" || cfg.Audit.LogFile.Path != "" {
		receive, store, err := auditInputs(ctx, cfg, log, m)
		if err != nil {
			return err
		}
		defer store.Close()
		actors = &deliver.Lookup{Store: store, Wait: cfg.Audit.Wait}
		g.Go(func() error { return receive(gctx) })
	}
	stream := func(gctx context.Context) error {
		sinks, closeSinks, err := openSinks(gctx, cfg, log, m, actors)
		if err != nil {
			return err
		}
		defer closeSinks()
		setIgnorePaths(cfg, targets, sinks, log)
		// A streaming PostgreSQL sink takes its writer lock before writing anything
		// (`status` opens sinks without claiming).
		if err := writerlock.ClaimAll(gctx, writerlock.PolicyFor(cfg.LeaderElection.Enabled, opts.wait), sinks); err != nil {
			return err
		}
		if metricsWhenStreaming != nil {
			// Called once: under leader election, losing the lease ends the process.
			if err := metricsWhenStreaming(gctx); err != nil {
				return err
			}
		}
		popts := cfg.PipelineOptions()
		popts.Log, popts.Metrics = log, m
		popts.Abandon = func(cause error) bool { return errors.Is(cause, leader.ErrLostLease) }
		popts.Nudge = crds.Changed // a CRD of a degraded resource changed: try it now
		// The cluster's identity goes with every checkpoint: one rebuilt under the same
		// name is found at start even when its RVs have passed the old checkpoints.
		if uid, err := source.ClusterIdentity(gctx, src.clients); err != nil || uid == "" {
			log.Info("cannot read the cluster's identity (the kube-system namespace's uid); a cluster rebuilt under the same name is found only by its resource versions",
				"error", err)
		} else {
			popts.ClusterUID = uid
		}
		p := pipeline.New(popts, sinks, pipelineTargets(cfg, src, resolution, log, m))
		running.Store(p)
		m.Streaming(true)
		defer func() {
			running.Store(nil)
			m.Streaming(false) // the lease lost: a standby again until the process restarts
		}()
		sctx, stopSignals := context.WithCancel(gctx)
		defer stopSignals()
		go serveSignals(sctx, cfg, cs, p, log, m) // resnapshot requests (resnapshot.go)
		// RBAC revoked under an open watch shows only when the watch re-opens; the
		// access check names it before, while the data still flows.
		access := &source.AccessCheck{Client: cs, Targets: targets, Interval: cfg.Kubernetes.AccessCheckInterval, Log: log, Observer: m}
		accessDone := make(chan struct{})
		go func() { defer close(accessDone); access.Run(sctx) }()
		defer func() { stopSignals(); <-accessDone }() // its records cleared before m.Streaming(false)
		return p.Run(gctx)
	}
	g.Go(func() error {
		if !cfg.LeaderElection.Enabled {
			return stream(gctx)
		}
		return lead(gctx, cs, cfg, log, stream)
	})
	err = g.Wait()
	if err == nil || (errors.Is(err, context.Canceled) && ctx.Err() != nil) {
		log.Info("stopped")
		return nil
	}
	return err
}

// ignoreSetter is a sink that keeps a history which may leave noise out (the PostgreSQL
// sink's changes table).
type ignoreSetter interface {
	SetIgnorePaths(res change.Resource, paths []string)
}

// setIgnorePaths gives each sink that leaves noise out of its history the ignore paths
// of every target (resources[].history, with the resource's defaults).
func setIgnorePaths(cfg *config.Config, targets []source.Target, sinks []pipeline.Sink, log *slog.Logger) {
	for _, t := range targets {
		paths := cfg.IgnorePaths(t.Spec, t.Resource.Group, t.Resource.Resource)
		if len(paths) == 0 {
			continue
		}
		for _, s := range sinks {
			if is, ok := s.(ignoreSetter); ok {
				is.SetIgnorePaths(t.Resource, paths)
				log.Info("history ignores changes of these paths alone", "sink", s.Name(), "resource", t.Resource.ID(),
					"scope", t.Resource.Scope, "paths", paths)
			}
		}
	}
}

// hasIgnorePaths says whether any target has ignore paths (setIgnorePaths would give a
// sink some).
func hasIgnorePaths(cfg *config.Config, targets []source.Target) bool {
	for _, t := range targets {
		if len(cfg.IgnorePaths(t.Spec, t.Resource.Group, t.Resource.Resource)) > 0 {
			return true
		}
	}
	return false
}

func sourceSpecs(cfg *config.Config) []source.Spec {
	specs := make([]source.Spec, len(cfg.Resources))
	for i, r := range cfg.Resources {
		specs[i] = source.Spec{Name: r.Name, Namespaces: r.Namespaces, LabelSelector: r.LabelSelector, FieldSelector: r.FieldSelector,
			Resync: cfg.ResyncOf(i)}
	}
	return specs
}

// pipelineTargets are the pipeline's targets: the Feed of each resolved target, which
// follows its resolution (a target's stream reads the resource in the version served
// when it starts: a CRD created after the start, or recreated with other versions).
func pipelineTargets(cfg *config.Config, src *kubeSource, resolution *source.Resolution, log *slog.Logger, m *metrics.Metrics) []pipeline.Target {
	feeds := resolution.Feeds(source.Stream{
		Clients:  src.clients,
		PageSize: cfg.Kubernetes.PageSize,
		// The digest key goes nowhere else: not into a log, not into a metric label.
		Transform: &source.Transform{RedactSecrets: cfg.Transforms.RedactSecrets, DigestKey: cfg.Transforms.Key(), Drop: cfg.Transforms.Drop},
		Log:       log,
		Observer:  m,

		ListMode:     source.ListMode(cfg.Kubernetes.ListMode),
		ListModes:    &source.ListModes{}, // what listMode auto found, once per resource
		RelistJitter: cfg.Kubernetes.RelistJitter,
	})
	out := make([]pipeline.Target, len(feeds))
	for i, f := range feeds {
		out[i] = f
	}
	return out
}
