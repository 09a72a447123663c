package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

func newStatusCmd() *cobra.Command {
	return configCommand("status", "Show, per sink and resource, the checkpoint RV, its age and object counts", func(cmd *cobra.Command, cfg *config.Config) error {
		w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
		defer w.Flush()
		fmt.Fprintln(w, "SINK\tRESOURCE\tSCOPE\tCHECKPOINT\tAGE\tLIVE\tDELETED\tQUARANTINED")
		var targets []source.Target // resolved once, for the sinks that need them
		var writers []string        // who writes each PostgreSQL sink, after the table
		for _, sc := range cfg.Sinks {
			if sc.Type == config.SinkPostgres {
				ws, err := postgresStatus(cmd.Context(), w, cfg, sc)
				if err != nil {
					return err
				}
				writers = append(writers, ws...)
				continue
			}
			if targets == nil {
				src, err := connectSource(cfg)
				if err != nil {
					return err
				}
				if targets, err = source.Resolve(src.clients.Discovery, sourceSpecs(cfg)); err != nil {
					return err
				}
			}
			if err := storeStatus(cmd.Context(), w, cfg, sc, targets); err != nil {
				return err
			}
		}
		w.Flush()
		for _, line := range writers {
			fmt.Fprintln(cmd.OutOrStdout(), line)
		}
		return nil
	})
}

func scopeColumn(scope string) string {
	if scope == "" {
		return "-"
	}
	return scope
}

// postgresStatus reads the sink's own tables: checkpoints with their age, object counts,
// and the changes in quarantine that no later version has replaced. It returns lines
// naming the running kube-cdc process that writes the sink (the holder of its writer
// lock) and those waiting to take over.
func postgresStatus(ctx context.Context, w io.Writer, cfg *config.Config, sc config.Sink) ([]string, error) {
	o := *sc.Postgres
	o.Migrate = false
	s, err := postgres.New(ctx, sc.Name, cfg.Cluster, o, nil)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rows, err := s.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	for _, r := range rows {
		id := change.Resource{Group: r.Group, Resource: r.Resource}.ID()
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\n", r.Sink, id, scopeColumn(r.Scope), r.Checkpoint,
			time.Since(r.UpdatedAt).Round(time.Second), r.Live, r.Deleted, r.Quarantined)
	}
	ws, err := s.Writers(ctx)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	if len(ws) == 0 {
		return []string{fmt.Sprintf("sink %s: no running kube-cdc writes it", sc.Name)}, nil
	}
	var lines []string
	for _, wr := range ws {
		verb := "written by"
		if !wr.Holds {
			verb = "waiting to take over (--wait):"
		}
		lines = append(lines, fmt.Sprintf("sink %s: %s %s", sc.Name, verb, wr))
	}
	return lines, nil
}

// storeStatus reads a kafka or stdout sink's checkpoint store: the checkpoint and the
// number of live keys per configured resource (the store keeps no times or tombstones).
func storeStatus(ctx context.Context, w io.Writer, cfg *config.Config, sc config.Sink, targets []source.Target) error {
	var store checkpoint.Store
	var err error
	switch sc.Type {
	case config.SinkKafka:
		store, err = kafka.OpenCheckpoint(ctx, cfg.Cluster, *sc.Kafka, sc.Checkpoint)
	default:
		store, err = openStore(sc)
	}
	if err != nil {
		return fmt.Errorf("sink %s: %w (a running kube-cdc holds a file store's lock)", sc.Name, err)
	}
	if store == (checkpoint.None{}) {
		fmt.Fprintf(w, "%s\t(no checkpoint store: relists at every start)\t\t\t\t\t\t\n", sc.Name)
		return nil
	}
	defer store.Close()
	for _, t := range targets {
		ck, err := store.Load(ctx, sc.Name, t.Resource)
		if err != nil {
			return fmt.Errorf("sink %s: %s: %w", sc.Name, t.Resource.ID(), err)
		}
		owns, live := t.Owns(), 0
		if err := store.KeyIndex(ctx, sc.Name, t.Resource, func(k change.Key, _ change.Entry) error {
			if owns == nil || owns(k) {
				live++
			}
			return nil
		}); err != nil {
			return fmt.Errorf("sink %s: %s: %w", sc.Name, t.Resource.ID(), err)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t-\t%d\t-\t-\n", sc.Name, t.Resource.ID(), scopeColumn(t.Resource.Scope), ck, live)
	}
	return nil
}
