package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/read/history"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

// historyOptions are the flags of `kube-cdc history`.
type historyOptions struct {
	namespace string // "" with the flag unset: the one namespace the name has changes in
	since     string // a duration back from now, or an RFC 3339 time; "": everything
	output    string // text | json
	sink      string // a PostgreSQL sink's name; "": the first PostgreSQL sink
}

func newHistoryCmd() *cobra.Command {
	var opts historyOptions
	cmd := configCommand("history RESOURCE NAME",
		"Show every recorded version of one object, who changed it and what changed, from a PostgreSQL sink",
		func(cmd *cobra.Command, cfg *config.Config) error {
			args := cmd.Flags().Args()
			return runHistory(cmd.Context(), cmd.OutOrStdout(), cfg, args[0], args[1], cmd.Flags().Changed("namespace"), opts)
		})
	cmd.Args = cobra.ExactArgs(2)
	cmd.Long = `Show every version of one object in a PostgreSQL sink's changes table (the configured
cluster's), in the order they were written: when kube-cdc observed it, the op, the
resourceVersion, who changed it (field manager/operation) and, for a delete, whether it
was observed or inferred and why; then what changed against the version before, as a
unified diff of the YAML (metadata.resourceVersion is left out: the header has it). The
first version is shown whole, and so is the first after a delete or of a new uid. -o json
prints a JSON array, one element per version, with the change as an RFC 6902 JSON Patch
(resourceVersion included): applied in order to {}, the patches rebuild every version
exactly.

RESOURCE is named as in the config's resources (a plural, plural.group,
group/version/resource, or a kind) and matched against the resources the sink records,
so history needs no access to the cluster. Without -n, the one namespace whose history
holds the name is taken; when several do, history exits 1 naming them.

Characters that are invisible or reorder text (bidirectional controls such as U+202E,
zero-width characters, other format and control characters) are shown as markers like
⟨U+202E⟩ in the text, so no line can pass for another; -o json keeps values exact.`
	fs := cmd.Flags()
	fs.StringVarP(&opts.namespace, "namespace", "n", "", "the object's namespace (default: the only namespace in which the name has history; \"\" for a cluster-scoped object)")
	fs.StringVar(&opts.since, "since", "", "only versions observed at or after then: a duration back from now (90m, 48h) or an RFC 3339 time (a header's time includes its version)")
	fs.StringVarP(&opts.output, "output", "o", "text", "text or json")
	fs.StringVar(&opts.sink, "sink", "", "the PostgreSQL sink to read (default: the first one configured)")
	return cmd
}

func runHistory(ctx context.Context, w io.Writer, cfg *config.Config, resourceName, name string, nsSet bool, opts historyOptions) error {
	if opts.output != "text" && opts.output != "json" {
		return fmt.Errorf("--output %q: want text or json", opts.output)
	}
	since, err := history.ParseSince(opts.since, time.Now())
	if err != nil {
		return err
	}
	s, sc, res, err := openRecorded(ctx, cfg, opts.sink, "history", resourceName)
	if err != nil {
		return err
	}
	defer s.Close()
	where := fmt.Sprintf("in cluster %s (sink %s)", cfg.Cluster, sc.Name)
	ns := opts.namespace
	if !nsSet {
		nss, err := s.HistoryNamespaces(ctx, res.Group, res.Resource, name)
		if err != nil {
			return fmt.Errorf("sink %s: %w", sc.Name, err)
		}
		switch len(nss) {
		case 0:
			return fmt.Errorf("no history of %s %q %s", res.ID(), name, where)
		case 1:
			ns = nss[0]
		default:
			return fmt.Errorf("%s %q has history in namespaces %s %s: choose one with -n", res.ID(), name, strings.Join(nss, ", "), where)
		}
	}
	key := change.Key{Namespace: ns, Name: name}
	versions, err := s.History(ctx, store.HistoryQuery{Group: res.Group, Resource: res.Resource, Namespace: ns, Name: name, Since: since})
	if errors.Is(err, store.ErrNoHistory) {
		return fmt.Errorf("no history of %s %s %s", res.ID(), key, where)
	}
	if err != nil {
		return fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	shown, err := history.Show(versions)
	if err != nil {
		return fmt.Errorf("%s %s: %w", res.ID(), key, err)
	}
	title := fmt.Sprintf("%s %s %s: %d versions", res.ID(), key, where, len(shown))
	if len(shown) == 1 {
		title = strings.TrimSuffix(title, "s")
	}
	if !since.IsZero() {
		title += " since " + history.FormatTime(since)
	}
	return history.Print(w, title, shown, opts.output)
}

// historySink is the sink named name, or the first PostgreSQL sink.
func historySink(cfg *config.Config, name, command string) (config.Sink, error) {
	for _, sc := range cfg.Sinks {
		if name == "" && sc.Type == config.SinkPostgres {
			return sc, nil
		}
		if name != "" && sc.Name == name {
			if sc.Type != config.SinkPostgres {
				return sc, fmt.Errorf("--sink %s: a %s sink keeps no history; %s reads a postgres sink's changes table", name, sc.Type, command)
			}
			return sc, nil
		}
	}
	if name != "" {
		return config.Sink{}, fmt.Errorf("--sink %s: no sink of that name in the config", name)
	}
	return config.Sink{}, fmt.Errorf("%s reads a postgres sink's changes table, and the config has no postgres sink", command)
}

// storeOptions are what the read store of sc needs: cmd hands it the schema owner's check,
// so that the read side imports no sink.
func storeOptions(cfg *config.Config, sc config.Sink) store.Options {
	return store.Options{DSN: sc.Postgres.DSN, Schema: sc.Postgres.Schema, Cluster: cfg.Cluster, Sink: sc.Name,
		VerifySchema: postgres.VerifySchema, Ping: true}
}

// openRecorded opens the postgres sink named name (the first one when "") to read only
// (store.Open: it writes nothing, neither the schema nor the cluster's retention) and
// matches resourceName against the resources it records: the steps history and as-of
// share. command names the caller in errors.
func openRecorded(ctx context.Context, cfg *config.Config, name, command, resourceName string) (*store.Store, config.Sink, change.Resource, error) {
	sc, err := historySink(cfg, name, command)
	if err != nil {
		return nil, sc, change.Resource{}, err
	}
	s, err := store.Open(ctx, storeOptions(cfg, sc))
	if err != nil {
		return nil, sc, change.Resource{}, err
	}
	recorded, err := s.RecordedResources(ctx)
	if err != nil {
		s.Close()
		return nil, sc, change.Resource{}, fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	res, err := history.MatchRecorded(resourceName, recorded)
	if err != nil {
		s.Close()
		return nil, sc, change.Resource{}, fmt.Errorf("sink %s, cluster %s: %w", sc.Name, cfg.Cluster, err)
	}
	return s, sc, res, nil
}
