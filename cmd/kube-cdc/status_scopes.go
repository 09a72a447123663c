package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// Scopes by content. A checkpoint names its scope by a short digest of the scope's
// namespaces and selectors (source.Resolve), which says nothing to a reader. The digest is
// a function of the configuration alone, and status loads the configuration anyway to
// find the sinks, so status recomputes it for every configured resource entry and shows
// the content instead; a PostgreSQL sink's checkpoints can then be shown without asking
// the cluster. Storing the content beside the checkpoint would need the write path and a
// schema change for what is only presentation, and would still go stale differently from
// the configuration; a checkpoint whose scope the loaded configuration does not name (a
// scope removed, whose checkpoint the next relist forgets) is shown by its id.

// configuredScopes maps the scope id of every scope the configuration's resources give
// to its content. The id does not depend on the resource, only on the namespaces and
// selectors, so one map serves every resource.
func configuredScopes(cfg *config.Config) map[string]scopeContent {
	out := map[string]scopeContent{"": {Namespaces: []string{}}}
	for _, r := range cfg.Resources {
		// Each entry alone, against a stand-in that serves one namespaced resource: the
		// digest and the split into one scope per namespace stay source.Resolve's own.
		targets, err := source.Resolve(scopeDiscovery{}, []source.Spec{{Name: scopeProbe,
			Namespaces: r.Namespaces, LabelSelector: r.LabelSelector, FieldSelector: r.FieldSelector}})
		if err != nil {
			continue
		}
		for _, t := range targets {
			out[t.Resource.Scope] = contentOf(t)
		}
	}
	return out
}

func contentOf(t source.Target) scopeContent {
	ns := t.Namespaces
	if ns == nil {
		ns = []string{}
	}
	return scopeContent{Namespaces: ns, LabelSelector: t.LabelSelector, FieldSelector: t.FieldSelector}
}

// scopeOf is the content of the scope with id (nil when cfg does not name it).
func scopeOf(scopes map[string]scopeContent, id string) *scopeContent {
	sc, ok := scopes[id]
	if !ok {
		return nil
	}
	return &sc
}

const scopeProbe = "scopeprobes.status.kube-cdc.io"

// scopeDiscovery serves the one resource configuredScopes resolves; source.Resolve asks
// it nothing else.
type scopeDiscovery struct{ discovery.DiscoveryInterface }

func (scopeDiscovery) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return []*metav1.APIResourceList{{GroupVersion: "status.kube-cdc.io/v1", APIResources: []metav1.APIResource{{
		Name: "scopeprobes", Kind: "ScopeProbe", Namespaced: true, Verbs: metav1.Verbs{"list", "watch"},
	}}}}, nil
}
