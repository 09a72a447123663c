package source

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Resolution is the configured targets as the server serves them now (design §1.8: CRDs
// created, deleted or changing versions while running are followed without a restart).
// ResolveOrWait resolves them at start, leaving some waiting for their CRD; after a
// target's stream failed, the pipeline asks for the target again (Feed.Resolve) and
// discovery is asked again: a CRD created at last, or recreated with other versions, is
// streamed in the version served now. The Scopes of a resource are rebuilt whenever one
// of its targets is resolved anew, so their lookups read through that version too. The
// pipeline reaches each target through its Feed (Feeds).
type Resolution struct {
	clients *Clients
	disc    discovery.DiscoveryInterface
	log     *slog.Logger

	mu      sync.Mutex
	targets []Target
	scopes  []*Scopes
	asked   []bool // resolve was called for the target before
}

// NewResolution follows targets (from ResolveOrWait or Resolve) through clients'
// discovery.
func NewResolution(clients *Clients, targets []Target, log *slog.Logger) *Resolution {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Resolution{clients: clients, disc: clients.Discovery, log: log,
		targets: slices.Clone(targets), asked: make([]bool, len(targets))}
	r.scopes = r.groupScopes(r.targets)
	return r
}

// target returns target i as resolved now and the Scopes of its resource.
func (r *Resolution) target(i int) (Target, *Scopes) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.targets[i], r.scopes[i]
}

// resolve is target i's resource as the server serves it now (Feed.Resolve). The first
// call answers with the resolution made at start, unless the target waits; every later
// call (the pipeline asks again only after the target's stream failed) asks discovery.
// A resource the server does not serve is a Fault with ReasonNotServed; discovery
// failing is one with ReasonDiscovery.
func (r *Resolution) resolve(ctx context.Context, i int) (change.Resource, error) {
	r.mu.Lock()
	t := r.targets[i]
	first := !r.asked[i]
	r.asked[i] = true
	r.mu.Unlock()
	if first && !t.Waiting {
		return t.Resource, nil
	}
	res, err := served(r.disc, t.Resource, t.version)
	if err == nil && !res.Namespaced && len(t.Namespaces) > 0 {
		err = fault(t.Resource, ReasonNotServed, fmt.Errorf("resource %s is served cluster-scoped, and namespaces are configured for it", res.ID()))
	}
	if err != nil {
		return t.Resource, err
	}
	res.Scope = t.Resource.Scope
	if res == t.Resource && !t.Waiting {
		return res, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Every target of the resource that names it the same way is served the same way.
	for j, o := range r.targets {
		if o.Resource.Group == res.Group && o.Resource.Resource == res.Resource && o.version == t.version {
			scope := o.Resource.Scope
			r.targets[j].Resource = res
			r.targets[j].Resource.Scope = scope
			r.targets[j].Waiting = false
		}
	}
	var same []int
	var group []Target
	for j, o := range r.targets {
		if o.Resource.Group == res.Group && o.Resource.Resource == res.Resource {
			same = append(same, j)
			group = append(group, o)
		}
	}
	for k, s := range r.groupScopes(group) {
		r.scopes[same[k]] = s
	}
	r.log.Info("resource resolved: the server serves it", "resource", res.ID(), "version", res.Version, "kind", res.Kind,
		"namespaced", res.Namespaced, "was", t.Resource.Version)
	return res, nil
}

// groupScopes is GroupScopes whose lookups read through a resolved target's version
// when the first target of a resource still waits.
func (r *Resolution) groupScopes(targets []Target) []*Scopes {
	out := GroupScopes(r.clients, targets, r.log)
	for i, s := range out {
		if !targets[i].Waiting {
			s.res = targets[i].Resource
		}
	}
	return out
}

// served asks discovery how the server serves r's group and plural now: in version when
// one is given, else in the group's preferred version, or the first of its versions that
// has the resource with the verbs list and watch.
func served(disc discovery.DiscoveryInterface, r change.Resource, version string) (change.Resource, error) {
	versions := []string{version}
	switch {
	case version != "":
	case r.Group == "":
		versions = []string{"v1"}
	default:
		groups, err := disc.ServerGroups()
		if err != nil {
			return r, fault(r, ReasonDiscovery, fmt.Errorf("resource %s: discover the apiserver's groups: %w", r.ID(), err))
		}
		versions = nil
		for _, g := range groups.Groups {
			if g.Name != r.Group {
				continue
			}
			versions = append(versions, g.PreferredVersion.Version)
			for _, v := range g.Versions {
				if v.Version != g.PreferredVersion.Version {
					versions = append(versions, v.Version)
				}
			}
		}
	}
	for _, v := range versions {
		gv := v
		if r.Group != "" {
			gv = r.Group + "/" + v
		}
		list, err := disc.ServerResourcesForGroupVersion(gv)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return r, fault(r, ReasonDiscovery, fmt.Errorf("resource %s: discover %s: %w", r.ID(), gv, err))
		}
		for _, ar := range list.APIResources {
			if ar.Name == r.Resource && slices.Contains(ar.Verbs, "list") && slices.Contains(ar.Verbs, "watch") {
				return change.Resource{Group: r.Group, Version: v, Resource: r.Resource, Kind: ar.Kind, Namespaced: ar.Namespaced}, nil
			}
		}
	}
	where := "in any version"
	if version != "" {
		where = "in version " + version
	}
	return r, fault(r, ReasonNotServed, fmt.Errorf("resource %s: the server does not serve it %s (is its CRD installed?)", r.ID(), where))
}
