package main

import (
	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/version"
)

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go version",
		Long: `Print kube-cdc's semantic version, the commit it was built from, the build date (the
commit's time: release builds are reproducible) and the Go toolchain and platform.
-o json prints {"version","commit","date","goVersion","platform"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return version.Print(cmd.OutOrStdout(), output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
