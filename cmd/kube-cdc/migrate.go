package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending schema migrations to every PostgreSQL sink",
		Args:  cobra.NoArgs,
	}
	file := configFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(*file, cmd.Flags())
		if err != nil {
			return err
		}
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
	}
	return cmd
}
