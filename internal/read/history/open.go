package history

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// Open opens the read store of opts (store.Open: it writes nothing, neither the schema
// nor the cluster's retention) and matches resourceName against the resources it
// records: the steps `kube-cdc history` and `as-of` share. On error nothing stays open.
func Open(ctx context.Context, opts store.Options, resourceName string) (*store.Store, change.Resource, error) {
	s, err := store.Open(ctx, opts)
	if err != nil {
		return nil, change.Resource{}, err
	}
	recorded, err := s.RecordedResources(ctx)
	if err != nil {
		s.Close()
		return nil, change.Resource{}, fmt.Errorf("sink %s: %w", opts.Sink, err)
	}
	res, err := MatchRecorded(resourceName, recorded)
	if err != nil {
		s.Close()
		return nil, change.Resource{}, fmt.Errorf("sink %s, cluster %s: %w", opts.Sink, opts.Cluster, err)
	}
	return s, res, nil
}

// Request is one object's history as `kube-cdc history` asks for it.
type Request struct {
	Sink      string          // the sink's name, for messages
	Resource  change.Resource // as Open matched it
	Name      string
	Namespace string
	// AnyNamespace (-n unset): take the one namespace whose history holds the name, and
	// fail naming them when several do.
	AnyNamespace bool
	Since        time.Time // zero: every version
	Output       string    // text | json
}

// Write prints r's versions from s to w (Print), titled with the object, the cluster and
// the sink. An object without history is an error naming it.
func Write(ctx context.Context, w io.Writer, s *store.Store, r Request) error {
	res := r.Resource
	where := fmt.Sprintf("in cluster %s (sink %s)", s.Cluster(), r.Sink)
	ns := r.Namespace
	if r.AnyNamespace {
		nss, err := s.HistoryNamespaces(ctx, res.Group, res.Resource, r.Name)
		if err != nil {
			return fmt.Errorf("sink %s: %w", r.Sink, err)
		}
		switch len(nss) {
		case 0:
			return fmt.Errorf("no history of %s %q %s", res.ID(), r.Name, where)
		case 1:
			ns = nss[0]
		default:
			return fmt.Errorf("%s %q has history in namespaces %s %s: choose one with -n", res.ID(), r.Name, strings.Join(nss, ", "), where)
		}
	}
	key := change.Key{Namespace: ns, Name: r.Name}
	versions, err := s.History(ctx, store.HistoryQuery{Group: res.Group, Resource: res.Resource, Namespace: ns, Name: r.Name, Since: r.Since})
	if errors.Is(err, store.ErrNoHistory) {
		return fmt.Errorf("no history of %s %s %s", res.ID(), key, where)
	}
	if err != nil {
		return fmt.Errorf("sink %s: %w", r.Sink, err)
	}
	shown, err := Show(versions)
	if err != nil {
		return fmt.Errorf("%s %s: %w", res.ID(), key, err)
	}
	title := fmt.Sprintf("%s %s %s: %d versions", res.ID(), key, where, len(shown))
	if len(shown) == 1 {
		title = strings.TrimSuffix(title, "s")
	}
	if !r.Since.IsZero() {
		title += " since " + FormatTime(r.Since)
	}
	return Print(w, title, shown, r.Output)
}
