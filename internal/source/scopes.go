package source

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"unsafe"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Scopes are every configured target of one resource (design §1.9, "Scopes own their
// keys"). A sink keeps one row per object whatever scope wrote it, so a scope's relist
// cannot tell from the sink alone whether a key it did not list is gone or another
// scope's. Scopes answers from the cluster: it decides which target's relist examines a
// held key (Owns) and, for the few keys a relist did not show, which are gone and which
// left every scope (Lookup).
//
// Membership is computed, not recorded: an object is in a scope when its namespace is
// one of the scope's (or the scope has none), its labels match the scope's label
// selector, and it matches the field selector. Field selectors on metadata.name and
// metadata.namespace are evaluated here; any other field is left to the apiserver (a LIST
// of that scope's selectors narrowed to the object's name), so the answer is exact.
type Scopes struct {
	clients *Clients
	res     change.Resource // the group and resource the targets share
	scopes  []compiledScope
	log     *slog.Logger
}

type compiledScope struct {
	t          Target
	labels     labels.Selector
	local      []fields.Requirement // requirements on metadata.name/namespace, evaluated here
	serverSide bool                 // some requirement names another field: ask the apiserver
}

// GroupScopes returns, for each target in order, the Scopes of its resource: targets of
// one (group, resource) share one.
func GroupScopes(clients *Clients, targets []Target, log *slog.Logger) []*Scopes {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	byRes := map[[2]string]*Scopes{}
	out := make([]*Scopes, len(targets))
	for i, t := range targets {
		id := [2]string{t.Resource.Group, t.Resource.Resource}
		s := byRes[id]
		if s == nil {
			s = &Scopes{clients: clients, res: t.Resource, log: log.With("resource", t.Resource.ID())}
			byRes[id] = s
		}
		s.scopes = append(s.scopes, compileScope(t))
		out[i] = s
	}
	return out
}

// compileScope parses t's selectors. What cannot be evaluated here (a field other than
// metadata.name and metadata.namespace, or a selector that does not parse, which the
// stream's own LIST reports) is left to the apiserver.
func compileScope(t Target) compiledScope {
	cs := compiledScope{t: t, labels: labels.Everything()}
	if t.LabelSelector != "" {
		if sel, err := labels.Parse(t.LabelSelector); err == nil {
			cs.labels = sel
		} else {
			cs.serverSide = true
		}
	}
	if t.FieldSelector != "" {
		sel, err := fields.ParseSelector(t.FieldSelector)
		if err != nil {
			cs.serverSide = true
			return cs
		}
		for _, r := range sel.Requirements() {
			if r.Field == "metadata.name" || r.Field == "metadata.namespace" {
				cs.local = append(cs.local, r)
			} else {
				cs.serverSide = true
			}
		}
	}
	return cs
}

// Owns is the key filter of target t's reconcile diff (pipeline.Target.Owns): the keys
// in its namespaces (every key when it has none). The sweeping target (Sweeps) also owns
// the keys of every namespace no target covers, so that rows a narrowed or removed scope
// left behind are examined (and tombstoned out of scope) by a relist. Nil means every key.
func (s *Scopes) Owns(t Target) func(change.Key) bool {
	if len(t.Namespaces) == 0 {
		return nil
	}
	sweeper := s.Sweeps(t)
	return func(k change.Key) bool {
		if slices.Contains(t.Namespaces, k.Namespace) {
			return true
		}
		return sweeper && !s.coversNamespace(k.Namespace)
	}
}

// Sweeps reports whether t is the one target of its resource that examines, after a
// relist, the keys no target's namespaces cover (pipeline.Target.Sweeps): the first
// cluster-wide target, else the first target.
func (s *Scopes) Sweeps(t Target) bool {
	sweeper := s.scopes[0].t
	for _, cs := range s.scopes {
		if len(cs.t.Namespaces) == 0 {
			sweeper = cs.t
			break
		}
	}
	return sweeper.Resource.Scope == t.Resource.Scope
}

func (s *Scopes) coversNamespace(ns string) bool {
	for _, cs := range s.scopes {
		if len(cs.t.Namespaces) == 0 || slices.Contains(cs.t.Namespaces, ns) {
			return true
		}
	}
	return false
}

// bulkLookup is the number of keys of one namespace (or of the whole lookup, when a
// target is cluster-wide) above which one paged LIST replaces a request per key.
const bulkLookup = 16

// found is what the cluster holds under a key.
type found struct {
	uid    string
	labels labels.Set
}

// Lookup (pipeline.Target.Lookup of target t) tells, of each held key, what the cluster
// holds under it now: the object's uid, whether some scope of the resource covers it, and
// whether t's own scope does. The pipeline decides from that (change.Presence.End) which
// keys to tombstone and at which RV. Keys in a namespace no scope covers that the
// apiserver forbids reading are Unreadable, whether or not they exist.
func (s *Scopes) Lookup(ctx context.Context, t Target, held map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
	return s.presence(ctx, &t, held)
}

// Verdict is Lookup for one key of a watch's DELETED event (uid is the event's): ""
// when the object is in some scope (it left this scope for another, or came back), else
// the reason (change.Presence.End). An object under the key with another uid means this
// one was deleted (ReasonGone): its delete precedes the new object's create, so it is
// recorded.
func (s *Scopes) Verdict(ctx context.Context, k change.Key, uid string) (string, error) {
	p, err := s.presence(ctx, nil, map[change.Key]change.Entry{k: {UID: uid}})
	if err != nil {
		return "", err
	}
	if v := p[k].End(uid); v != change.ReasonRecreated {
		return v, nil
	}
	return change.ReasonGone, nil // the event is the delete, observed: the object is gone
}

// presence looks up held in the cluster; Here is told for t's scope (never when t is nil).
func (s *Scopes) presence(ctx context.Context, t *Target, held map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
	out := make(map[change.Key]change.Presence, len(held))
	if s.everything() {
		// One scope of the whole resource: what it did not list is gone (an object created
		// since the LIST comes back with its watch event, above the tombstone's RV).
		for k := range held {
			out[k] = change.Presence{}
		}
		return out, nil
	}
	keys := make([]change.Key, 0, len(held))
	for k := range held {
		keys = append(keys, k)
	}
	objs, forbidden, err := s.fetch(ctx, keys)
	if err != nil {
		return nil, err
	}
	for k := range held {
		if forbidden[k.Namespace] {
			out[k] = change.Presence{Unreadable: true}
			continue
		}
		o, ok := objs[k]
		if !ok {
			out[k] = change.Presence{}
			continue
		}
		in, here, err := s.inScope(ctx, t, k, o)
		if err != nil {
			return nil, err
		}
		out[k] = change.Presence{UID: o.uid, InScope: in, Here: here}
	}
	return out, nil
}

// inScope reports whether any scope covers the object o under k, and whether t's does
// (never when t is nil).
func (s *Scopes) inScope(ctx context.Context, t *Target, k change.Key, o found) (in, here bool, err error) {
	var ask []compiledScope
	for _, cs := range s.scopes {
		if len(cs.t.Namespaces) > 0 && !slices.Contains(cs.t.Namespaces, k.Namespace) {
			continue
		}
		if !cs.labels.Matches(o.labels) || !matchLocal(cs.local, k) {
			continue
		}
		if cs.serverSide {
			ask = append(ask, cs)
			continue
		}
		in = true
		if t != nil && cs.t.Resource.Scope == t.Resource.Scope {
			return true, true, nil
		}
	}
	for _, cs := range ask {
		if in && (t == nil || cs.t.Resource.Scope != t.Resource.Scope) {
			continue // nothing more to learn from this scope
		}
		got, err := s.listByName(ctx, k, cs.t.LabelSelector, cs.t.FieldSelector)
		if err != nil {
			return false, false, err
		}
		if g, ok := got[k]; ok && g.uid == o.uid {
			in = true
			if t != nil && cs.t.Resource.Scope == t.Resource.Scope {
				return true, true, nil
			}
		}
	}
	return in, false, nil
}

func matchLocal(reqs []fields.Requirement, k change.Key) bool {
	for _, r := range reqs {
		v := k.Name
		if r.Field == "metadata.namespace" {
			v = k.Namespace
		}
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals:
			if v != r.Value {
				return false
			}
		case selection.NotEquals:
			if v == r.Value {
				return false
			}
		}
	}
	return true
}

// fetch reads what the cluster holds under keys: one paged LIST of the whole resource
// when there are many keys and a target is cluster-wide (so the RBAC allows it), else
// per namespace one paged LIST when it has many keys, one LIST narrowed to the name per
// key otherwise (LIST rather than GET: the RBAC kube-cdc needs is list and watch). A
// namespace no target covers whose reads are forbidden is reported in forbidden.
func (s *Scopes) fetch(ctx context.Context, keys []change.Key) (map[change.Key]found, map[string]bool, error) {
	objs := make(map[change.Key]found, len(keys))
	forbidden := map[string]bool{}
	want := make(map[change.Key]bool, len(keys))
	byNS := map[string][]change.Key{}
	for _, k := range keys {
		want[k] = true
		byNS[k.Namespace] = append(byNS[k.Namespace], k)
	}
	if len(keys) > bulkLookup && s.clusterWide() {
		return objs, forbidden, s.list(ctx, "", "", "", want, objs)
	}
	for ns, ks := range byNS {
		var err error
		if len(ks) > bulkLookup {
			err = s.list(ctx, ns, "", "", want, objs)
		} else {
			for _, k := range ks {
				var got map[change.Key]found
				if got, err = s.listByName(ctx, k, "", ""); err != nil {
					break
				}
				if o, ok := got[k]; ok {
					objs[k] = o
				}
			}
		}
		if err != nil {
			if apierrors.IsForbidden(err) && !s.coversNamespace(ns) {
				s.log.Info("cannot read a namespace no scope covers any more; its rows are tombstoned out of scope", "namespace", ns)
				forbidden[ns] = true
				continue
			}
			return nil, nil, err
		}
	}
	return objs, forbidden, nil
}

// everything reports whether the resource's only scope is all of it.
func (s *Scopes) everything() bool {
	if len(s.scopes) != 1 {
		return false
	}
	t := s.scopes[0].t
	return len(t.Namespaces) == 0 && t.LabelSelector == "" && t.FieldSelector == ""
}

func (s *Scopes) clusterWide() bool {
	for _, cs := range s.scopes {
		if len(cs.t.Namespaces) == 0 {
			return true
		}
	}
	return false
}

// listByName lists the object named k in k's namespace, with the given selectors.
func (s *Scopes) listByName(ctx context.Context, k change.Key, labelSelector, fieldSelector string) (map[change.Key]found, error) {
	fs := "metadata.name=" + k.Name
	if fieldSelector != "" {
		fs = fieldSelector + "," + fs
	}
	out := map[change.Key]found{}
	return out, s.list(ctx, k.Namespace, labelSelector, fs, map[change.Key]bool{k: true}, out)
}

// list pages through the resource in ns (all namespaces when "") with the selectors and
// records the uid and labels of every object whose key is wanted.
func (s *Scopes) list(ctx context.Context, ns, labelSelector, fieldSelector string, want map[change.Key]bool, into map[change.Key]found) error {
	cont := ""
	for {
		req := s.clients.list.Get().AbsPath(collectionPath(s.res, ns)).Param("limit", strconv.Itoa(500))
		if cont != "" {
			req = req.Param("continue", cont)
		}
		if labelSelector != "" {
			req = req.Param("labelSelector", labelSelector)
		}
		if fieldSelector != "" {
			req = req.Param("fieldSelector", fieldSelector)
		}
		result := req.Do(ctx)
		body, err := result.Raw()
		if err != nil {
			return fmt.Errorf("resource %s: look up keys: %w", s.res.ID(), result.Error())
		}
		gjson.Get(unsafe.String(unsafe.SliceData(body), len(body)), "items").ForEach(func(_, item gjson.Result) bool {
			md := item.Get("metadata").Map()
			k := change.Key{Namespace: md["namespace"].String(), Name: md["name"].String()}
			if !want[k] {
				return true
			}
			set := labels.Set{}
			md["labels"].ForEach(func(key, value gjson.Result) bool {
				set[key.String()] = value.String()
				return true
			})
			into[k] = found{uid: md["uid"].String(), labels: set}
			return true
		})
		cont = gjson.GetBytes(body, "metadata.continue").Str
		if cont == "" {
			return nil
		}
	}
}
