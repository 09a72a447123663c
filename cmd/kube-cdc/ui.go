package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/read/ui"
	"github.com/kube-cdc/kube-cdc/internal/status"
)

func newUICmd() *cobra.Command {
	var listen, sink string
	cmd := configCommand("ui", "Serve a read-only web timeline of a PostgreSQL sink's history (loopback by default)",
		func(cmd *cobra.Command, cfg *config.Config) error {
			if sink != "" {
				cfg.UI.Sink = sink
			}
			addr := listen
			if !cmd.Flags().Changed("listen") && cfg.UI.Address != "" {
				addr = cfg.UI.Address
			}
			log := cfg.Log.Logger(os.Stderr)
			h, closeUI, err := newUIHandler(cmd.Context(), cfg, log, true)
			if err != nil {
				return err
			}
			defer closeUI()
			err = ui.Serve(cmd.Context(), addr, h, func(bound string) {
				log.Info("serving the web UI", "url", "http://"+bound+"/", "sink", uiSinkName(cfg), "cluster", cfg.Cluster)
				fmt.Fprintf(cmd.OutOrStdout(), "kube-cdc ui: http://%s/\n", bound)
			})
			return ui.AddressInUse(err, addr, !cmd.Flags().Changed("listen") && cfg.UI.Address != "")
		})
	cmd.Long = ui.Help
	cmd.Flags().StringVar(&listen, "listen", ui.DefaultAddress, "address to serve on (default this machine only; key ui.address is used when the flag is not given)")
	cmd.Flags().StringVar(&sink, "sink", "", "the PostgreSQL sink to read (key ui.sink; default the first postgres sink)")
	return cmd
}

// uiSinkName is the name of the sink the UI reads, "" when there is none.
func uiSinkName(cfg *config.Config) string {
	if sc, err := cfg.ReadSink(cfg.UI.Sink, "the web UI"); err == nil {
		return sc.Name
	}
	return ""
}

// newUIHandler connects to the UI's sink read-only and builds the handler; its status
// page reads that sink alone, as kube-cdc status would (no access to the cluster),
// through the same read-only pool as every other page.
// ping: connect now (kube-cdc ui), or when a page asks (run, whose sink retries a
// database that is down).
func newUIHandler(ctx context.Context, cfg *config.Config, log *slog.Logger, ping bool) (http.Handler, func(), error) {
	sc, err := cfg.ReadSink(cfg.UI.Sink, "the web UI")
	if err != nil {
		return nil, nil, fmt.Errorf("ui: %w", err)
	}
	st, err := ui.Connect(ctx, storeOptions(cfg, sc), ping)
	if err != nil {
		return nil, nil, fmt.Errorf("ui: %w", err)
	}
	only := *cfg
	only.Sinks = []config.Sink{sc}
	h, err := ui.New(ui.Options{
		Store: st, Cluster: cfg.Cluster,
		Token: cfg.UI.Token, TrustedHeader: cfg.UI.TrustedHeader, Log: log,
		Status: func(ctx context.Context) (*status.Report, error) {
			// Through the UI's own store: read-only, and connected once, not per request.
			return status.Read(ctx, &only, configuredScopes(&only), func() ([]status.ScopedResource, error) { return nil, nil },
				status.Stores{Open: func(context.Context, *config.Config, config.Sink) (*store.Store, func(), error) {
					return st, func() {}, nil
				}, JoinCounts: joinCounts})
		},
	})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return h, st.Close, nil
}
