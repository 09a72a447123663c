package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/moment"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/read/why"
)

// whyOptions are the flags of `kube-cdc why`.
type whyOptions struct {
	namespace, at, output, sink string
	window                      time.Duration
}

func newWhyCmd() *cobra.Command {
	var opts whyOptions
	cmd := configCommand("why RESOURCE NAME",
		"List what changed before an object broke: the object, its controllers, ConfigMaps, Secrets, node, Services and Ingresses, each with who",
		func(cmd *cobra.Command, cfg *config.Config) error {
			args := cmd.Flags().Args()
			return runWhy(cmd.Context(), cmd.OutOrStdout(), cfg, args[0], args[1], opts)
		})
	cmd.Args = cobra.ExactArgs(2)
	cmd.Long = `List the changes, in the window before --at, to the object and to what it depends on, as a
PostgreSQL sink recorded them (the SQL function why()): its own versions, its controllers
up the owner chain, the ConfigMaps and Secrets its spec references (Secrets as digests),
its node, and the Services that select it and the Ingresses that route to them. Each with
who made it: the audit user where kube-cdc receives the apiserver's audit events, and the
field manager. RESOURCE is named as for history.`
	fs := cmd.Flags()
	fs.StringVarP(&opts.namespace, "namespace", "n", "", "the object's namespace (\"\" for a cluster-scoped object)")
	fs.StringVar(&opts.at, "at", "now", "when it broke: now, a duration back (15m) or an RFC 3339 time")
	fs.DurationVar(&opts.window, "window", store.DefaultLookback, "how far back from --at")
	fs.StringVarP(&opts.output, "output", "o", "text", "text or json")
	fs.StringVar(&opts.sink, "sink", "", "the PostgreSQL sink to read (default: the first one configured)")
	return cmd
}

func runWhy(ctx context.Context, w io.Writer, cfg *config.Config, resourceName, name string, opts whyOptions) error {
	if opts.output != "text" && opts.output != "json" {
		return fmt.Errorf("--output %q: want text or json", opts.output)
	}
	if opts.window <= 0 {
		return fmt.Errorf("--window %s: want a positive duration", opts.window)
	}
	at, err := moment.Parse(opts.at, time.Now())
	if err != nil {
		return fmt.Errorf("--at %w", err)
	}
	s, sc, res, err := openRecorded(ctx, cfg, opts.sink, "why", resourceName)
	if err != nil {
		return err
	}
	defer s.Close()
	key := change.Key{Namespace: opts.namespace, Name: name}
	rows, err := s.Why(ctx, store.WhyQuery{Group: res.Group, Resource: res.Resource, Namespace: key.Namespace, Name: key.Name,
		At: at, Lookback: opts.window})
	if err != nil {
		return fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	title := fmt.Sprintf("why %s %s in cluster %s (sink %s): %d changes in the %s before %s", res.ID(), key, cfg.Cluster, sc.Name,
		len(rows), opts.window, at.UTC().Format(time.RFC3339))
	return why.Print(w, title, rows, opts.output)
}
