package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/read/asof"
	"github.com/kube-cdc/kube-cdc/internal/read/history"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// asOfOptions are the flags of `kube-cdc as-of`.
type asOfOptions struct {
	namespace string // with the flag unset: every namespace
	output    string // table | yaml | json
	sink      string // a PostgreSQL sink's name; "": the first PostgreSQL sink
}

func newAsOfCmd() *cobra.Command {
	var opts asOfOptions
	cmd := configCommand("as-of TIME RESOURCE",
		"Show every object of a resource as kube-cdc had observed it at a moment, from a PostgreSQL sink",
		func(cmd *cobra.Command, cfg *config.Config) error {
			args := cmd.Flags().Args()
			return runAsOf(cmd.Context(), cmd.OutOrStdout(), cfg, args[0], args[1], cmd.Flags().Changed("namespace"), opts, time.Now())
		})
	cmd.Args = cobra.ExactArgs(2)
	cmd.Long = asof.Help
	fs := cmd.Flags()
	fs.StringVarP(&opts.namespace, "namespace", "n", "", "only this namespace (default: every namespace; \"\" for cluster-scoped objects)")
	fs.StringVarP(&opts.output, "output", "o", "table", "table, yaml or json (yaml and json: a List of the objects)")
	fs.StringVar(&opts.sink, "sink", "", "the PostgreSQL sink to read (default: the first one configured)")
	return cmd
}

func runAsOf(ctx context.Context, w io.Writer, cfg *config.Config, when, resourceName string, nsSet bool, opts asOfOptions, now time.Time) error {
	if !slices.Contains(asof.Outputs, opts.output) {
		return fmt.Errorf("--output %q: want %s", opts.output, strings.Join(asof.Outputs, ", "))
	}
	at, err := asof.ParseTime(when, now)
	if err != nil {
		return err
	}
	if at.After(now) {
		return fmt.Errorf("TIME %q: %s is in the future", when, history.FormatTime(at))
	}
	s, sc, res, err := openRecorded(ctx, cfg, opts.sink, "as-of", resourceName)
	if err != nil {
		return err
	}
	defer s.Close()
	objs, err := s.AsOf(ctx, store.AsOfQuery{At: at, Group: res.Group, Resource: res.Resource,
		Namespace: opts.namespace, AllNamespaces: !nsSet})
	if err != nil {
		return fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	return asof.PrintKind(w, res.Group, res.Resource, objs, at, opts.output, !nsSet)
}
