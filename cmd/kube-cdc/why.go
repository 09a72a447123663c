package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/read/why"
)

func newWhyCmd() *cobra.Command {
	var r why.Request
	var sink string
	cmd := configCommand("why RESOURCE NAME",
		"List what changed before an object broke: the object, its controllers, ConfigMaps, Secrets, node, Services and Ingresses, each with who",
		func(cmd *cobra.Command, cfg *config.Config) error {
			args := cmd.Flags().Args()
			if err := r.Validate(); err != nil {
				return err
			}
			s, sc, res, err := openRecorded(cmd.Context(), cfg, sink, "why", args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			r.Resource, r.Key.Name, r.Where = res, args[1], fmt.Sprintf("in cluster %s (sink %s)", cfg.Cluster, sc.Name)
			return why.Write(cmd.Context(), cmd.OutOrStdout(), s, r)
		})
	cmd.Args = cobra.ExactArgs(2)
	cmd.Long = cmd.Short + ` (the SQL function why(), docs/reading.md). RESOURCE is named as for history.`
	fs := cmd.Flags()
	fs.StringVarP(&r.Key.Namespace, "namespace", "n", "", "the object's namespace (\"\" for a cluster-scoped object)")
	fs.StringVar(&r.At, "at", "now", "when it broke: now, a duration back (15m) or an RFC 3339 time")
	fs.DurationVar(&r.Window, "window", store.DefaultLookback, "how far back from --at")
	fs.StringVarP(&r.Output, "output", "o", "text", "text or json")
	fs.StringVar(&sink, "sink", "", "the PostgreSQL sink to read (default: the first one configured)")
	return cmd
}
