package source

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Spec is one configured resource: the `resources[]` config keys.
type Spec struct {
	// Name is a plural ("configmaps"), plural.group ("deployments.apps",
	// "widgets.example.com"), group/version/resource ("apps/v1/deployments",
	// "v1/configmaps" for the core group), or a kind or short name ("ConfigMap", "cm").
	Name          string
	Namespaces    []string // empty: all namespaces
	LabelSelector string
	FieldSelector string
	// Resync is how often the pipeline relists the spec's targets (Feed.Resync); 0 only
	// when needed. The source itself does not use it.
	Resync time.Duration
}

// Target is a resolved Spec: what one stream lists and watches.
type Target struct {
	Resource      change.Resource
	Namespaces    []string
	LabelSelector string
	FieldSelector string
	// Waiting marks a target whose resource the server did not serve when it was resolved
	// (ResolveOrWait): Resource holds only the group, the plural, the scope and a version
	// the name gave. Its stream fails with a Fault (ReasonNotServed) until a Resolution
	// resolves it.
	Waiting bool
	// Resync is the Spec's.
	Resync time.Duration
	// Spec is the index of the Spec the target was resolved from, for what the
	// configuration says of it beyond the source (resources[Spec].history).
	Spec int

	version string // the version the configured name gave (group/version/resource); "": the server's preferred
}

// Scope is the target's scope: its id and what it narrows the resource to.
func (t Target) Scope() Scope {
	return Scope{ID: t.Resource.Scope, Namespaces: t.Namespaces, LabelSelector: t.LabelSelector, FieldSelector: t.FieldSelector}
}

// Owns reports whether an object with key k is in the target's namespaces; nil when the
// target has no namespace restriction. Selectors cannot be checked from a key: the
// reconcile diff uses Scopes (Owns, Lookup), which also asks the cluster about the keys a
// relist did not show, so one scope never tombstones another's objects.
func (t Target) Owns() func(change.Key) bool {
	if len(t.Namespaces) == 0 {
		return nil
	}
	return func(k change.Key) bool { return slices.Contains(t.Namespaces, k.Namespace) }
}

// Resolve looks every spec up through discovery (CRDs included) and returns one target
// per spec and namespace (see perNamespace). A name that matches nothing is an error listing close matches.
func Resolve(disc discovery.DiscoveryInterface, specs []Spec) ([]Target, error) {
	return resolve(disc, specs, false)
}

// ResolveOrWait is Resolve for a daemon, which follows CRDs while it runs: a name the
// server does not serve now but a CRD could serve later — plural.group or
// group/version/resource, with a group that has a dot, as every CRD's group must — gives
// targets that wait for it (Target.Waiting). Any other name that matches nothing is
// still an error: a bare plural, kind or short name says nothing of the group to wait
// for, and the core group and the dotless groups are the apiserver's own.
func ResolveOrWait(disc discovery.DiscoveryInterface, specs []Spec) ([]Target, error) {
	return resolve(disc, specs, true)
}

func resolve(disc discovery.DiscoveryInterface, specs []Spec, wait bool) ([]Target, error) {
	lists, err := disc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discover the apiserver's resources: %w", err)
	}
	var all []change.Resource
	var aliases [][]string
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			all = append(all, change.Resource{Group: gv.Group, Version: gv.Version, Resource: r.Name, Kind: r.Kind, Namespaced: r.Namespaced})
			aliases = append(aliases, resourceAliases(r))
		}
	}
	targets := make([]Target, 0, len(specs))
	seen := map[string]string{}
	for i, s := range specs {
		res, err := match(all, aliases, s.Name)
		waiting := false
		if unknown := (unknownError{}); errors.As(err, &unknown) && wait {
			var ok bool
			if res, ok = awaitable(s.Name); ok {
				err, waiting = nil, true
			} else {
				err = fmt.Errorf("%w (a CRD's resource that is not served yet is waited for when named plural.group or group/version/resource)", err)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("resources[%d]: %w", i, err)
		}
		if !res.Namespaced && len(s.Namespaces) > 0 && !waiting {
			return nil, fmt.Errorf("resources[%d].namespaces: %s is cluster-scoped", i, res.ID())
		}
		version := ""
		if parts := strings.Split(strings.TrimSpace(s.Name), "/"); len(parts) > 1 {
			version = res.Version
		}
		for _, sc := range ScopesOf(s) {
			r := res
			r.Scope = sc.ID
			id := r.ID() + "#" + r.Scope
			if prev, dup := seen[id]; dup {
				return nil, fmt.Errorf("resources[%d]: %q names the same resource and scope as %q", i, s.Name, prev)
			}
			seen[id] = s.Name
			targets = append(targets, Target{Resource: r, Namespaces: sc.Namespaces, LabelSelector: sc.LabelSelector, FieldSelector: sc.FieldSelector,
				Waiting: waiting, Resync: s.Resync, Spec: i, version: version})
		}
	}
	return targets, nil
}

// awaitable parses a name a CRD could come to serve: plural.group or
// group/version/resource, whose group has a dot (the apiextensions API requires one) and
// whose parts are valid names. It returns the resource as far as the name tells.
func awaitable(name string) (change.Resource, bool) {
	name = strings.ToLower(strings.TrimSpace(name))
	var r change.Resource
	switch parts := strings.Split(name, "/"); len(parts) {
	case 1:
		plural, group, ok := strings.Cut(name, ".")
		if !ok {
			return r, false
		}
		r = change.Resource{Group: group, Resource: plural}
	case 3:
		r = change.Resource{Group: parts[0], Version: parts[1], Resource: parts[2]}
		if len(validation.IsDNS1035Label(r.Version)) > 0 {
			return r, false
		}
	default:
		return r, false
	}
	ok := strings.Contains(r.Group, ".") && len(validation.IsDNS1123Subdomain(r.Group)) == 0 &&
		len(validation.IsDNS1123Label(r.Resource)) == 0
	return r, ok
}

// unknownError is match's answer for a name that matches no served resource.
type unknownError struct{ msg string }

func (e unknownError) Error() string { return e.msg }

// perNamespace splits a spec with several namespaces into one spec per namespace, each
// listed and watched through its namespaced path: RoleBindings in those namespaces then
// suffice (least privilege), and each namespace has its own RV sequence, checkpoint and
// scope. A spec with one namespace or none is returned as it is, so its scope (and its
// checkpoints) stay what they were.
func perNamespace(s Spec) []Spec {
	if len(s.Namespaces) <= 1 {
		return []Spec{s}
	}
	var out []Spec
	seen := map[string]bool{}
	for _, ns := range s.Namespaces {
		if seen[ns] {
			continue
		}
		seen[ns] = true
		one := s
		one.Namespaces = []string{ns}
		out = append(out, one)
	}
	return out
}

func resourceAliases(r metav1.APIResource) []string {
	a := []string{strings.ToLower(r.Kind), r.SingularName}
	return append(a, r.ShortNames...)
}

func match(all []change.Resource, aliases [][]string, name string) (change.Resource, error) {
	name = strings.TrimSpace(name)
	var found []change.Resource
	switch parts := strings.Split(name, "/"); len(parts) {
	case 3: // group/version/resource
		for _, r := range all {
			if r.Group == parts[0] && r.Version == parts[1] && r.Resource == parts[2] {
				found = append(found, r)
			}
		}
		if len(found) == 0 {
			// A version that is served but not preferred: trust the caller's version.
			for _, r := range all {
				if r.Group == parts[0] && r.Resource == parts[2] {
					r.Version = parts[1]
					found = append(found, r)
				}
			}
		}
	case 2: // version/resource in the core group
		for _, r := range all {
			if r.Group == "" && r.Resource == parts[1] {
				r.Version = parts[0]
				found = append(found, r)
			}
		}
	case 1:
		lower := strings.ToLower(name)
		for _, r := range all {
			if r.ID() == lower {
				found = append(found, r)
			}
		}
		if len(found) == 0 {
			for i, r := range all {
				if r.Resource == lower || slices.Contains(aliases[i], lower) {
					found = append(found, r)
				}
			}
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		// The core group wins a bare plural, as kubectl's does.
		for _, r := range found {
			if r.Group == "" {
				return r, nil
			}
		}
		ids := make([]string, len(found))
		for i, r := range found {
			ids[i] = r.ID()
		}
		return change.Resource{}, fmt.Errorf("resource %q is ambiguous: %s", name, strings.Join(ids, ", "))
	}
	return change.Resource{}, unknownError{fmt.Sprintf("unknown resource %q%s", name, suggest(all, name))}
}

// suggest lists up to five served resources whose names are close to name.
func suggest(all []change.Resource, name string) string {
	type cand struct {
		id string
		d  int
	}
	var cs []cand
	base := strings.ToLower(name)
	if i := strings.LastIndex(base, "/"); i >= 0 {
		base = base[i+1:]
	}
	for _, r := range all {
		d := levenshtein(base, r.ID())
		if d2 := levenshtein(strings.SplitN(base, ".", 2)[0], r.Resource); d2 < d {
			d = d2
		}
		if d <= 3 || strings.Contains(r.ID(), base) {
			cs = append(cs, cand{r.ID(), d})
		}
	}
	if len(cs) == 0 {
		return " (run `kubectl api-resources` to list what the server serves)"
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].d < cs[j].d || cs[i].d == cs[j].d && cs[i].id < cs[j].id })
	var ids []string
	for i, c := range cs {
		if i == 5 {
			break
		}
		ids = append(ids, c.id)
	}
	return "; did you mean " + strings.Join(ids, ", ") + "?"
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Scope is one scope of a resource: the part of it one target lists and watches.
type Scope struct {
	// ID names the scope (change.Resource.Scope; checkpoints are keyed by it): "" for the
	// whole resource, else a short digest of the namespaces and selectors, which says
	// nothing to a reader.
	ID            string
	Namespaces    []string // empty: every namespace
	LabelSelector string
	FieldSelector string
}

// ScopesOf returns the scopes of spec s, in the order of its targets: one per namespace
// when it names several (perNamespace), else one. They depend on the spec alone, not on
// the resource or the server, so a reader of checkpoints (`kube-cdc status`) can name
// each scope id the daemon writes by its content without asking the cluster.
func ScopesOf(s Spec) []Scope {
	var out []Scope
	for _, one := range perNamespace(s) {
		out = append(out, Scope{ID: scope(one), Namespaces: one.Namespaces, LabelSelector: one.LabelSelector, FieldSelector: one.FieldSelector})
	}
	return out
}

// scope is "" for a whole resource, else a short digest of the configured subset.
func scope(s Spec) string {
	if len(s.Namespaces) == 0 && s.LabelSelector == "" && s.FieldSelector == "" {
		return ""
	}
	ns := slices.Clone(s.Namespaces)
	slices.Sort(ns)
	h := sha256.Sum256([]byte(strings.Join(ns, ",") + "|" + s.LabelSelector + "|" + s.FieldSelector))
	return hex.EncodeToString(h[:6])
}
