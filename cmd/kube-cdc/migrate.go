package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

func newMigrateCmd() *cobra.Command {
	return configCommand("migrate", "Apply pending schema migrations to every PostgreSQL sink", func(cmd *cobra.Command, cfg *config.Config) error {
		n := 0
		for _, s := range cfg.Sinks {
			if s.Type != config.SinkPostgres {
				continue
			}
			n++
			applied, err := postgres.Migrate(cmd.Context(), s.Postgres.DSN, s.Postgres.Schema)
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
}
