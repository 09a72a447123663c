// Command kube-cdc streams the state of a Kubernetes cluster into PostgreSQL, Kafka or
// stdout: `run`, `migrate`, `check`, `status`, `history`, `version` (docs/contract.md,
// "CLI and configuration"). This package only wires the internal packages together.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/config"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// The live heap is small (no object cache) while every change allocates its
		// object a few times over: collecting at 4× the live heap instead of 2× halves
		// the GC's share of the CPU for a few MiB more. GOGC and GOMEMLIMIT still rule.
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		// One line, naming the cause: wrapped errors from drivers sometimes carry newlines.
		fmt.Fprintln(os.Stderr, "kube-cdc: "+strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " "))
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "kube-cdc",
		Short:         "Stream Kubernetes objects into PostgreSQL, Kafka or stdout, like Debezium does for a database",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCmd(), newMigrateCmd(), newCheckCmd(), newStatusCmd(), newHistoryCmd(), newAsOfCmd(), newWhyCmd(), newResnapshotCmd(), newUICmd(), newVersionCmd())
	return root
}

// configCommand is a subcommand that loads the config (-c FILE, env, flags) and runs
// with it.
func configCommand(use, short string, run func(cmd *cobra.Command, cfg *config.Config) error) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	fs := cmd.Flags()
	file := fs.StringP("config", "c", "", "config file (YAML); default: none (built-in defaults, env, flags)")
	config.RegisterFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := config.Load(config.LoadOptions{File: *file, Flags: fs})
		if err != nil {
			return err
		}
		return run(cmd, cfg)
	}
	return cmd
}
