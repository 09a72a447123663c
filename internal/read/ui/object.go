package ui

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/health"
	"github.com/kube-cdc/kube-cdc/internal/read/history"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// version is one changes row of the object page, newest first, with its diff.
type version struct {
	history.Entry
	Epoch     int
	EpochMark bool // the first version seen in its epoch after one in an earlier epoch
	actor
	Lines []history.DiffLine
	Zone  *time.Location // the page's, for the version's time
}

type link struct {
	Label, URL, Note string
}

type objectPage struct {
	page
	Resource, Namespace, Name string
	Versions                  []version
	// Recent are the newest versionsShown versions, Older the rest (collapsed under "show
	// all": an object that changes every minute has thousands).
	Recent, Older []version
	// Total is how many versions the object has; when the page diffs only the newest
	// versionsDiffed of them, AllURL is the same page with every one.
	Total, Undiffed  int // Undiffed: the oldest versions not diffed
	AllURL           string
	Owners, Children []link
	TimelineURL      string // the timeline of this object over the range the feed showed
	// Events are the Kubernetes Events about the object (any of its uids), newest first,
	// when the schema has the events table.
	Events []store.Event
	// Health is the object's on its newest version (internal/health; nil for a resource
	// without a health rule), and WhyURL its "before it broke" page: at the moment it
	// turned failed or degraded when it is so now, else at now.
	Health *health.Health
	WhyURL string
}

// objectEvents is how many of an object's events its page lists.
const objectEvents = 200

// versionsShown is how many versions the object page shows before "show all".
const versionsShown = 5

// versionsDiffed is how many of the newest versions the object page diffs unless asked for
// every one (all=1, or v= naming an older version): turning a version into the YAML its
// diff compares is most of the page's time (at 10M rows an object has ~83 versions).
const versionsDiffed = 20

// versions reads the object's versions as `kube-cdc history` does (store.History, one
// read of object_versions()), so the page shows the same diffs, newest first: the newest
// versionsDiffed of them unless all, or the version whose id is from is older. It returns
// how many versions there are in all too, and the object's health on its newest version,
// with when it turned bad (brokeAt) if it is.
func (s *Server) versions(ctx context.Context, cluster, group, resource, namespace, name string, all bool, from int64) (_ []version, total int, _ *health.Health, brokeAt time.Time, _ error) {
	raw, err := s.o.Store.History(ctx, store.HistoryQuery{Cluster: cluster, Group: group, Resource: resource, Namespace: namespace, Name: name})
	if err != nil && !errors.Is(err, store.ErrNoHistory) {
		return nil, 0, nil, time.Time{}, err
	}
	skip := 0 // the oldest versions left out
	if n := len(raw); !all && n > versionsDiffed && (from == 0 || from >= raw[n-versionsDiffed].ID) {
		skip = n - versionsDiffed
	}
	entries, err := history.Show(raw[skip:]) // the first one shown is still diffed against its Previous
	if err != nil {
		return nil, 0, nil, time.Time{}, err
	}
	out := make([]version, len(entries))
	for i, e := range entries {
		r := raw[skip+i]
		// As history's header shows them (actorOf): a user, client or manager holding a
		// character that reorders text cannot pass for another. The diff is already shown
		// so (Diff).
		x := version{Entry: e, Epoch: r.Epoch, Lines: e.Lines(), actor: actorOf(r.Actor)}
		x.EpochMark = skip+i > 0 && raw[skip+i-1].Epoch < x.Epoch
		x.ChangedBy = history.Visible(e.ChangedBy)
		out[i] = x
	}
	h, brokeAt := healthOf(group, resource, raw)
	slices.Reverse(out) // newest first, as the feed
	return out, len(raw), h, brokeAt, nil
}

// healthOf is the health of the newest of versions that holds an object (nil when none
// does, or the resource has no health rule), and, when it is failed or degraded, when
// the run of bad versions it ends began: the moment the object broke.
func healthOf(group, resource string, versions []store.Revision) (*health.Health, time.Time) {
	if !health.Known(group, resource) {
		return nil, time.Time{}
	}
	var (
		newest  *health.Health
		brokeAt time.Time
	)
	for i := len(versions) - 1; i >= 0; i-- {
		v := versions[i]
		if v.Object == nil {
			continue
		}
		h, err := health.Of(group, resource, v.Object)
		if err != nil {
			break
		}
		if newest == nil {
			newest = &h
		}
		if h.State != health.Failed && h.State != health.Degraded {
			break
		}
		brokeAt = v.ObservedAt
	}
	return newest, brokeAt
}

// versionURL is an object page's URL (objectURL's, with any query) at one version: v
// makes the page diff it even when it is older than the newest it diffs by default, and
// the fragment scrolls to it.
func versionURL(object string, id int64) string {
	v := strconv.FormatInt(id, 10)
	return object + "&v=" + v + "#v" + v
}

// relations reads the object's owners and children from the view owners (migration 013).
func (s *Server) relations(ctx context.Context, cluster, group, resource, namespace, name, uid string) (owners, children []link, err error) {
	refs, err := s.o.Store.Owners(ctx, cluster, group, resource, namespace, name)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range refs {
		l := link{Label: r.Kind + " " + r.Name, URL: objectURL(cluster, r.Group, r.Resource, namespace, r.Name)}
		if r.Controller {
			l.Note = "controller"
		}
		owners = append(owners, l)
	}
	if uid == "" {
		return owners, nil, nil
	}
	if refs, err = s.o.Store.Children(ctx, cluster, uid); err != nil {
		return nil, nil, err
	}
	for _, r := range refs {
		children = append(children, link{Label: r.Kind + " " + r.Name, URL: objectURL(cluster, r.Group, r.Resource, r.Namespace, r.Name)})
	}
	return owners, children, nil
}

func (s *Server) object(w http.ResponseWriter, r *http.Request) {
	p, err := s.frame(r, "Object")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	q := r.URL.Query()
	op := objectPage{page: p, Resource: q.Get("resource"), Namespace: q.Get("ns"), Name: q.Get("name")}
	if op.Resource == "" || op.Name == "" {
		s.fail(w, r, http.StatusBadRequest, errors.New("resource and name are required (ns for a namespaced object)"))
		return
	}
	op.Title = op.Resource + " " + change.Key{Namespace: op.Namespace, Name: op.Name}.String()
	group, resource := parseResource(op.Resource)
	from, _ := strconv.ParseInt(q.Get("v"), 10, 64) // a link to one version (as-of's) shows it diffed
	var brokeAt time.Time
	if op.Versions, op.Total, op.Health, brokeAt, err = s.versions(r.Context(), p.Cluster, group, resource, op.Namespace, op.Name, q.Get("all") == "1", from); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	op.WhyURL = whyURL(p.Cluster, group, resource, op.Namespace, op.Name, p.TZ, brokeAt)
	if p.Features.Owners {
		uid := ""
		if len(op.Versions) > 0 {
			uid = op.Versions[0].UID
		}
		if op.Owners, op.Children, err = s.relations(r.Context(), p.Cluster, group, resource, op.Namespace, op.Name, uid); err != nil {
			s.fail(w, r, http.StatusInternalServerError, err)
			return
		}
	}
	if p.Features.Events && len(op.Versions) > 0 {
		var uids []string
		for _, v := range op.Versions {
			if v.UID != "" && !slices.Contains(uids, v.UID) {
				uids = append(uids, v.UID)
			}
		}
		if op.Events, err = s.o.Store.Events(r.Context(), p.Cluster, uids, time.Time{}, time.Time{}, objectEvents); err != nil {
			s.fail(w, r, http.StatusInternalServerError, err)
			return
		}
		// An event's text is anyone's who may create events: shown as history shows a
		// field manager, a character that reorders text cannot pass for another.
		for i, e := range op.Events {
			op.Events[i].Reason, op.Events[i].Message, op.Events[i].Component = history.Visible(e.Reason), history.Visible(e.Message), history.Visible(e.Component)
		}
	}
	for i := range op.Versions {
		op.Versions[i].Zone = p.Zone
	}
	op.Recent, op.Older = op.Versions[:min(len(op.Versions), versionsShown)], op.Versions[min(len(op.Versions), versionsShown):]
	if op.Total > len(op.Versions) {
		all := r.URL.Query()
		all.Del("v")
		all.Set("all", "1")
		op.AllURL, op.Undiffed = "/object?"+all.Encode(), op.Total-len(op.Versions)
	}
	// Back to the timeline over the range the feed linked from (its range, from/to and tz
	// ride on the link); 30 days when the URL names none.
	tl := filter{Namespace: op.Namespace, Resource: op.Resource, Name: op.Name, Range: "30d", TZ: p.TZ}
	if q.Get("range") != "" || q.Get("from") != "" || q.Get("to") != "" {
		if f, err := parseFilter(q, s.o.Now()); err == nil {
			tl.Range, tl.From, tl.To = f.Range, f.From, f.To
		}
	}
	op.TimelineURL = "/?" + tl.values(p.Cluster, true).Encode()
	if len(op.Versions) == 0 {
		w.WriteHeader(http.StatusNotFound)
	}
	op.finish()
	s.render(w, "object", op)
}
