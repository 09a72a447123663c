package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

func newStatusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show, per sink and resource, the checkpoint RV, its age and object counts",
		Args:  cobra.NoArgs,
	}
	file := configFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(*file, cmd.Flags())
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
		defer w.Flush()
		fmt.Fprintln(w, "SINK\tRESOURCE\tSCOPE\tCHECKPOINT\tAGE\tLIVE\tDELETED")
		for _, sc := range cfg.Sinks {
			if sc.Type != config.SinkPostgres {
				fmt.Fprintf(w, "%s\t(%s sink: checkpoints in its %q store)\t\t\t\t\t\n", sc.Name, sc.Type, sc.Checkpoint.Type)
				continue
			}
			o := *sc.Postgres
			o.Migrate = false
			s, err := postgres.New(cmd.Context(), sc.Name, cfg.Cluster, o, nil)
			if err != nil {
				return err
			}
			rows, err := s.Status(cmd.Context())
			s.Close()
			if err != nil {
				return fmt.Errorf("sink %s: %w", sc.Name, err)
			}
			for _, r := range rows {
				id := r.Resource
				if r.Group != "" {
					id += "." + r.Group
				}
				scope := r.Scope
				if scope == "" {
					scope = "-"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%d\t%d\n", r.Sink, id, scope, r.Checkpoint,
					time.Since(r.UpdatedAt).Round(time.Second), r.Live, r.Deleted)
			}
		}
		return nil
	}
	return cmd
}
