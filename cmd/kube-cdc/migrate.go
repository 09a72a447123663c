package main

import (
	"fmt"

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
			if err := schema.MigrateReporting(cmd.Context(), cmd.OutOrStdout(), s.Name, s.Postgres.DSN, s.Postgres.Schema, partitionChanges); err != nil {
				return err
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
