package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
)

func newMigrateCmd() *cobra.Command {
	var partitionChanges bool
	cmd := configCommand("migrate", "Apply pending schema migrations to every PostgreSQL sink", func(cmd *cobra.Command, cfg *config.Config) error {
		n := 0
		for _, s := range cfg.Sinks {
			if s.Type != config.SinkPostgres {
				continue
			}
			n++
			var applied []string
			var err error
			if partitionChanges {
				out := cmd.OutOrStdout()
				applied, err = schema.PartitionChanges(cmd.Context(), s.Postgres.DSN, s.Postgres.Schema, func(st schema.PartitionStep) {
					lock := ""
					if st.Exclusive {
						lock = " (exclusive lock)"
					}
					fmt.Fprintf(out, "%s: %s: %s%s\n", s.Name, st.Name, st.Took.Round(1e6), lock)
				})
			} else {
				applied, err = schema.Migrate(cmd.Context(), s.Postgres.DSN, s.Postgres.Schema)
			}
			if err != nil {
				return fmt.Errorf("sink %s: %w", s.Name, err)
			}
			if len(applied) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: schema %s is up to date\n", s.Name, s.Postgres.Schema)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: applied %s to schema %s\n", s.Name, strings.Join(applied, ", "), s.Postgres.Schema)
			}
		}
		if n == 0 {
			fmt.Fprintln(cmd.OutOrStdout(), "no postgres sinks configured: nothing to migrate")
		}
		return nil
	})
	cmd.Flags().BoolVar(&partitionChanges, "partition-changes", false,
		"partition a large existing changes table online before applying migration 012 (docs/operations.md, \"Partitioning an existing changes table\")")
	return cmd
}
