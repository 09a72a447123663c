package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/health"
	"github.com/kube-cdc/kube-cdc/internal/moment"
	"github.com/kube-cdc/kube-cdc/internal/read/history"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// whyChange is one change on the why page: what `kube-cdc why` prints of it, and its diff
// as the object page shows it.
type whyChange struct {
	history.Entry
	Relation string // how the changed object relates to the one that broke: self, controller (2 up), configmap…
	Resource string // its resource id, "deployments.apps"
	Object   string // its namespace/name
	URL      string // the object's page, at this version
	actor
	Lines []history.DiffLine
	Open  bool // the diff is unfolded: an update or delete but a node's (heartbeats); a create's diff is the whole object
	Zone  *time.Location
}

// actor is who made a change as the pages show it: the audit user, the impersonator, the
// client (the user agent's first word; UserAgent whole, for its title) and how the event
// was joined. Every field is shown through history.Visible.
type actor struct {
	User, Impersonator, Client, UserAgent, Match string
}

func actorOf(a *change.Actor) actor {
	if a == nil {
		return actor{}
	}
	client, _, _ := strings.Cut(a.UserAgent, " ")
	return actor{User: history.Visible(a.Username), Impersonator: history.Visible(a.Impersonator),
		Client: history.Visible(client), UserAgent: history.Visible(a.UserAgent), Match: a.Match}
}

type whyPage struct {
	page
	Resource, Namespace, Name string
	At, Window                string // as the URL gives them (the form's values)
	Parsed, Since             time.Time
	ParsedText, SinceText     string
	Asked                     bool
	Changes                   []whyChange
	// Health is the object's, from its newest version in the window (internal/health);
	// nil when the window holds none or its resource has no health rule.
	Health    *health.Health
	ObjectURL string
}

// whyURL is the why page of a key, at a moment (zero: now).
func whyURL(cluster, group, resource, namespace, name, tz string, at time.Time) string {
	v := url.Values{"cluster": {cluster}, "resource": {resourceID(group, resource)}, "name": {name}}
	if namespace != "" {
		v.Set("ns", namespace)
	}
	if !at.IsZero() {
		v.Set("at", at.UTC().Format(time.RFC3339Nano))
	}
	if tz != "" {
		v.Set("tz", tz)
	}
	return "/why?" + v.Encode()
}

// why is "what changed before it broke": the changes in the window before a moment to an
// object and to what it depends on (store.Why with objects: why() and object_versions(),
// one read), oldest first as `kube-cdc why` prints them, each with who made it and its
// diff.
func (s *Server) why(w http.ResponseWriter, r *http.Request) {
	p, err := s.frame(r, "Before it broke")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	q := r.URL.Query()
	wp := whyPage{page: p, Resource: strings.TrimSpace(q.Get("resource")), Namespace: strings.TrimSpace(q.Get("ns")),
		Name: strings.TrimSpace(q.Get("name")), At: strings.TrimSpace(q.Get("at")), Window: strings.TrimSpace(q.Get("window"))}
	if wp.At == "" {
		wp.At = "now"
	}
	if wp.Window == "" {
		wp.Window = shortDuration(store.DefaultLookback)
	}
	if wp.Resource == "" && wp.Name == "" { // the form alone
		wp.finish()
		s.render(w, "why", wp)
		return
	}
	if wp.Resource == "" || wp.Name == "" {
		s.fail(w, r, http.StatusBadRequest, errors.New("resource and name are required (ns for a namespaced object)"))
		return
	}
	at, err := moment.Parse(wp.At, s.o.Now())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("at %w", err))
		return
	}
	window, err := time.ParseDuration(wp.Window)
	if err != nil || window <= 0 {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("window %q: want a positive duration (30m, 2h)", wp.Window))
		return
	}
	group, resource := parseResource(wp.Resource)
	wp.Title = "Before " + wp.Resource + " " + change.Key{Namespace: wp.Namespace, Name: wp.Name}.String() + " broke"
	wp.Asked, wp.Parsed, wp.Since = true, at, at.Add(-window)
	wp.ParsedText, wp.SinceText = when(at, p.Zone), when(wp.Since, p.Zone)
	wp.ObjectURL = objectURL(p.Cluster, group, resource, wp.Namespace, wp.Name)
	rows, err := s.o.Store.Why(r.Context(), store.WhyQuery{Cluster: p.Cluster, Group: group, Resource: resource,
		Namespace: wp.Namespace, Name: wp.Name, At: at, Lookback: window, Objects: true})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	revs := make([]store.Revision, len(rows))
	for i, x := range rows {
		revs[i] = store.Revision{ID: x.ChangeID, ObservedAt: x.ObservedAt, Op: x.Op, RV: x.RV, UID: x.UID, ChangedBy: x.ChangedBy,
			Object: x.Object, Previous: x.Previous, Actor: x.Actor, Inferred: x.Inferred, Reason: x.Reason}
	}
	entries, err := history.Show(revs)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	for i, x := range rows {
		c := whyChange{Entry: entries[i], Relation: x.Relation, Resource: resourceID(x.Resource.Group, x.Resource.Resource),
			Object: history.Visible(x.Key.String()), actor: actorOf(x.Actor), Lines: entries[i].Lines(),
			Open: x.Op != change.OpCreate && x.Relation != "node", Zone: p.Zone}
		c.ChangedBy = history.Visible(c.ChangedBy)
		c.URL = objectURL(p.Cluster, x.Resource.Group, x.Resource.Resource, x.Key.Namespace, x.Key.Name) + fmt.Sprintf("#v%d", x.ChangeID)
		if x.Relation == "controller" && x.Depth > 0 {
			c.Relation = fmt.Sprintf("controller (%d up)", x.Depth)
		}
		if x.Relation == "self" && x.Object != nil && health.Known(group, resource) {
			if h, err := health.Of(group, resource, x.Object); err == nil {
				wp.Health = &h
			}
		}
		wp.Changes = append(wp.Changes, c)
	}
	wp.finish()
	s.render(w, "why", wp)
}

// shortDuration writes d as a person types it: 30m, 1h, 1h30m (not 30m0s).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
