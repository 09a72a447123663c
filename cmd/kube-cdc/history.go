package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/read/history"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

// historyOptions are the flags of `kube-cdc history`.
type historyOptions struct {
	namespace string // "" with the flag unset: the one namespace the name has changes in
	since     string // a duration back from now, or an RFC 3339 time; "": everything
	output    string // text | json
	sink      string // a PostgreSQL sink's name; "": the first PostgreSQL sink
}

func newHistoryCmd() *cobra.Command {
	var opts historyOptions
	cmd := configCommand("history RESOURCE NAME",
		"Show every recorded version of one object, who changed it and what changed, from a PostgreSQL sink",
		func(cmd *cobra.Command, cfg *config.Config) error {
			args := cmd.Flags().Args()
			return runHistory(cmd.Context(), cmd.OutOrStdout(), cfg, args[0], args[1], cmd.Flags().Changed("namespace"), opts)
		})
	cmd.Args = cobra.ExactArgs(2)
	cmd.Long = history.Help
	fs := cmd.Flags()
	fs.StringVarP(&opts.namespace, "namespace", "n", "", "the object's namespace (default: the only namespace in which the name has history; \"\" for a cluster-scoped object)")
	fs.StringVar(&opts.since, "since", "", "only versions observed at or after then: a duration back from now (90m, 48h) or an RFC 3339 time (a header's time includes its version)")
	fs.StringVarP(&opts.output, "output", "o", "text", "text or json")
	fs.StringVar(&opts.sink, "sink", "", "the PostgreSQL sink to read (default: the first one configured)")
	return cmd
}

func runHistory(ctx context.Context, w io.Writer, cfg *config.Config, resourceName, name string, nsSet bool, opts historyOptions) error {
	if opts.output != "text" && opts.output != "json" {
		return fmt.Errorf("--output %q: want text or json", opts.output)
	}
	since, err := history.ParseSince(opts.since, time.Now())
	if err != nil {
		return err
	}
	s, sc, res, err := openRecorded(ctx, cfg, opts.sink, "history", resourceName)
	if err != nil {
		return err
	}
	defer s.Close()
	return history.Write(ctx, w, s, history.Request{Sink: sc.Name, Resource: res, Name: name, Namespace: opts.namespace,
		AnyNamespace: !nsSet, Since: since, Output: opts.output})
}

// storeOptions are what the read store of sc needs: cmd hands it the schema owner's check,
// so that the read side imports no sink.
func storeOptions(cfg *config.Config, sc config.Sink) store.Options {
	return store.Options{DSN: sc.Postgres.DSN, Schema: sc.Postgres.Schema, Cluster: cfg.Cluster, Sink: sc.Name,
		VerifySchema: postgres.VerifySchema, Ping: true}
}

// openRecorded opens the read sink named name (the first postgres sink when "") to read
// only and matches resourceName against the resources it records (history.Open).
func openRecorded(ctx context.Context, cfg *config.Config, name, command, resourceName string) (*store.Store, config.Sink, change.Resource, error) {
	sc, err := cfg.ReadSink(name, command)
	if err != nil {
		return nil, sc, change.Resource{}, err
	}
	s, res, err := history.Open(ctx, storeOptions(cfg, sc), resourceName)
	return s, sc, res, err
}
