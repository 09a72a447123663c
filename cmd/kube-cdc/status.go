package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/source"
	"github.com/kube-cdc/kube-cdc/internal/status"
)

func newStatusCmd() *cobra.Command {
	var output string
	cmd := configCommand("status", "Show, per sink and resource, the checkpoint RV, its age and object counts", func(cmd *cobra.Command, cfg *config.Config) error {
		if err := status.CheckFormat(output); err != nil {
			return err
		}
		r, err := readStatus(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		return status.Write(cmd.OutOrStdout(), r, output, time.Now())
	})
	cmd.Long = status.Help
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}

// readStatus is status.Read with the resources resolved as run resolves them: a resource
// waiting for its CRD still has checkpoints.
func readStatus(ctx context.Context, cfg *config.Config) (*status.Report, error) {
	return status.Read(ctx, cfg, configuredScopes(cfg), func() ([]status.ScopedResource, error) {
		src, err := connectSource(cfg)
		if err != nil {
			return nil, err
		}
		targets, err := source.ResolveOrWait(src.clients.Discovery, sourceSpecs(cfg))
		if err != nil {
			return nil, err
		}
		out := make([]status.ScopedResource, len(targets))
		for i, t := range targets {
			out[i] = status.ScopedResource{Resource: t.Resource, Owns: t.Owns(),
				Scope: contentOf(source.Scope{Namespaces: t.Namespaces, LabelSelector: t.LabelSelector, FieldSelector: t.FieldSelector})}
		}
		return out, nil
	}, status.Stores{Open: func(ctx context.Context, cfg *config.Config, sc config.Sink) (*store.Store, func(), error) {
		s, err := store.Open(ctx, storeOptions(cfg, sc))
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}, JoinCounts: joinCounts})
}

// joinCounts is the audit store's count of the actor join, read through s.
func joinCounts(ctx context.Context, s *store.Store, since time.Time) (status.Audit, error) {
	st, err := postgres.ReadJoinStats(ctx, s.Pool(), s.Schema(), s.Cluster(), since)
	return status.AuditOf(st), err
}

// configuredScopes maps the id of every scope the configuration's resources give to its
// content. A checkpoint names its scope by that id, a digest which says nothing to a
// reader; the ids are a function of the configuration alone (source.ScopesOf), and
// status loads the configuration anyway to find the sinks, so it shows the content
// instead, without asking the cluster. A checkpoint whose scope the configuration does
// not name (a scope removed, whose checkpoint the next relist forgets) is shown by its
// id. The id does not depend on the resource, so one map serves every resource.
func configuredScopes(cfg *config.Config) map[string]status.Scope {
	out := map[string]status.Scope{"": {Namespaces: []string{}}}
	for _, s := range sourceSpecs(cfg) {
		for _, sc := range source.ScopesOf(s) {
			out[sc.ID] = contentOf(sc)
		}
	}
	return out
}

func contentOf(sc source.Scope) status.Scope {
	ns := sc.Namespaces
	if ns == nil {
		ns = []string{}
	}
	return status.Scope{Namespaces: ns, LabelSelector: sc.LabelSelector, FieldSelector: sc.FieldSelector}
}
