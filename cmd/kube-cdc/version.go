package main

import (
	"encoding/json"
	"fmt"

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
			i := version.Get()
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(i)
			case "text", "":
				_, err := fmt.Fprintf(out, "kube-cdc %s\ncommit:   %s\nbuilt:    %s\ngo:       %s %s\n", i.Version, i.Commit, i.Date, i.GoVersion, i.Platform)
				return err
			default:
				return fmt.Errorf("--output %q: want text or json", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
