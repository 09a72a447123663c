package ui

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

func (s *Server) features(ctx context.Context) (store.Features, error) {
	return s.o.Store.Features(ctx)
}

// page is what every page's frame (templates/base.html) shows.
type page struct {
	Title    string
	Cluster  string
	Clusters []string // more than one: a fleet database, the picker is shown
	Features store.Features
	User     string // from Options.TrustedHeader
	Status   bool   // the status page exists
	Elapsed  time.Duration
	Path     string // the page's path, for the cluster picker's form
	Hidden   url.Values
	// Zone is the zone the page shows times in (the tz parameter; UTC by default), TZ the
	// parameter as links carry it ("" for UTC).
	Zone  *time.Location
	TZ    string
	start time.Time
}

// frame reads what every page needs: the schema's features, the clusters, and the
// cluster the URL names (or the default).
func (s *Server) frame(r *http.Request, title string) (page, error) {
	p := page{Title: title, Status: s.o.Status != nil, start: time.Now(), Path: r.URL.Path} // the real clock: Elapsed is a duration, Options.Now may be a test's moment
	if s.o.TrustedHeader != "" {
		p.User = r.Header.Get(s.o.TrustedHeader)
	}
	p.Zone, p.TZ = time.UTC, ""
	if loc, err := zone(r.URL.Query().Get("tz")); err == nil && loc != time.UTC {
		p.Zone, p.TZ = loc, loc.String()
	}
	var err error
	if p.Features, err = s.features(r.Context()); err != nil {
		return p, err
	}
	if p.Clusters, err = s.o.Store.Clusters(r.Context()); err != nil {
		return p, err
	}
	p.Cluster = r.URL.Query().Get("cluster")
	switch {
	case p.Cluster != "":
	case s.o.Cluster != "":
		p.Cluster = s.o.Cluster
	case len(p.Clusters) > 0:
		p.Cluster = p.Clusters[0]
	}
	if p.Cluster != "" && !slices.Contains(p.Clusters, p.Cluster) {
		p.Clusters = append(p.Clusters, p.Cluster)
	}
	// The picker's form keeps the page's other parameters.
	p.Hidden = url.Values{}
	for k, v := range r.URL.Query() {
		if k != "cluster" && k != "before" && k != "before_at" {
			p.Hidden[k] = v
		}
	}
	return p, nil
}

// resources are the resources the cluster has checkpoints of, by id ("deployments.apps").
func (s *Server) resources(ctx context.Context, cluster string) ([]string, error) {
	rs, err := s.o.Store.Resources(ctx, cluster)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID()
	}
	return out, nil
}

// parseResource reads a resource id as change.Resource.ID writes it: "configmaps",
// "deployments.apps".
func parseResource(id string) (group, resource string) {
	resource, group, _ = strings.Cut(id, ".")
	return group, resource
}

func resourceID(group, resource string) string {
	return change.Resource{Group: group, Resource: resource}.ID()
}

// objectURL is the object page of a key.
func objectURL(cluster, group, resource, namespace, name string) string {
	v := url.Values{"cluster": {cluster}, "resource": {resourceID(group, resource)}, "name": {name}}
	if namespace != "" {
		v.Set("ns", namespace)
	}
	return "/object?" + v.Encode()
}

// render executes the page's template; an error after the first byte is only logged.
func (s *Server) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages[name].ExecuteTemplate(w, "base", data); err != nil {
		s.o.Log.Error("ui: render", "page", name, "err", err)
	}
}

// fail shows an error page: 400 for a bad request, 500 otherwise. Its header is every
// page's (the cluster, the As-of link), unless the database cannot tell them: then the
// cluster the URL or the options name.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	if code >= 500 {
		s.o.Log.Error("ui: request failed", "path", r.URL.Path, "err", err)
	}
	p, ferr := s.frame(r, http.StatusText(code))
	if ferr != nil {
		p = page{Title: http.StatusText(code), Status: s.o.Status != nil, Path: r.URL.Path, Zone: time.UTC,
			Cluster: r.URL.Query().Get("cluster")}
		if p.Cluster == "" {
			p.Cluster = s.o.Cluster
		}
	}
	w.WriteHeader(code)
	s.render(w, "error", struct {
		page
		Code  int
		Error string
	}{p, code, err.Error()})
}

func (p *page) finish() { p.Elapsed = time.Since(p.start).Round(100 * time.Microsecond) }
