package source

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// errBehind says the server's resource version is below the one a watch would start
// from: the cluster went back in time (an etcd restored from a backup, a cluster rebuilt
// under the same name). A watch from the future RV would wait, silently, until the
// cluster's RVs reach it — and then deliver other changes under RVs the stream already
// holds. The stream relists instead, and the pipeline's reconcile diff, seeing the LIST
// below the checkpoint, starts a new epoch.
type errBehind struct {
	res     change.Resource
	from    change.RV // the RV the watch would start from
	current change.RV // the server's RV, from a LIST
}

func (e *errBehind) Error() string {
	return fmt.Sprintf("resource %s: the server is at resource version %s, behind %s this stream holds: time travel (an etcd restore, or a cluster rebuilt under the same name)",
		e.res.ID(), e.current, e.from)
}

// probeLine is logged (debug) for every probe: a LIST of at most one object that is no
// relist, for whoever counts the apiserver's LIST requests.
const probeLine = "asked the server for its resource version before watching"

// behind asks the server for its current resource version and returns an *errBehind
// when it is below from; nil when it is not, and the LIST's error when the server could
// not answer (the watch then finds out).
func (s *Stream) behind(ctx context.Context, from change.RV) error {
	if from == 0 {
		return nil
	}
	current, err := serverRV(ctx, s.Clients, s.Target, s.namespace(), s.Log)
	if err != nil {
		return err
	}
	if current == 0 || current >= from {
		return nil // a malformed RV is the watch's and the relist's to report
	}
	return &errBehind{res: s.Target.Resource, from: from, current: current}
}

// serverRV is the server's current resource version as target t reads it in namespace
// ns: a LIST of at most one object, read consistently. 0 when the server answered no
// integer RV (the relist reports it).
func serverRV(ctx context.Context, c *Clients, t Target, ns string, log *slog.Logger) (change.RV, error) {
	req := c.list.Get().AbsPath(collectionPath(t.Resource, ns)).Param("limit", "1")
	if t.LabelSelector != "" {
		req = req.Param("labelSelector", t.LabelSelector)
	}
	if t.FieldSelector != "" {
		req = req.Param("fieldSelector", t.FieldSelector)
	}
	body, err := do(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("resource %s: read the server's resource version: %w", t.Resource.ID(), err)
	}
	current, _ := change.ParseRV(gjson.GetBytes(body, "metadata.resourceVersion").Str)
	if log != nil {
		log.Debug(probeLine, "resource", t.Resource.ID(), "current", current.String())
	}
	return current, nil
}

// currentLine is logged (debug) for every Current: a LIST of at most one object that is
// no relist.
const currentLine = "asked the server for the newest object the sink holds"

// Current reads the object under k as the cluster has it now: its uid and RV, and
// whether there is one. It LISTs at most one object, narrowed to the name (list is the
// verb kube-cdc is granted, not get). The pipeline compares it with the newest version a
// sink holds, to find a cluster restored to a backup older than that version whose RVs
// have meanwhile grown past the checkpoint (then no probe sees it behind).
func (s *Scopes) Current(ctx context.Context, k change.Key) (change.Entry, bool, error) {
	req := s.clients.list.Get().AbsPath(collectionPath(s.res, k.Namespace)).
		Param("limit", "1").Param("fieldSelector", "metadata.name="+k.Name)
	body, err := do(ctx, req)
	if err != nil {
		return change.Entry{}, false, fmt.Errorf("resource %s: read %s: %w", s.res.ID(), k, err)
	}
	item := gjson.GetBytes(body, "items.0.metadata")
	if !item.Exists() {
		s.log.Debug(currentLine, "resource", s.res.ID(), "object", k.String(), "found", false)
		return change.Entry{}, false, nil
	}
	rv, err := change.ParseRV(item.Get("resourceVersion").Str)
	if err != nil {
		return change.Entry{}, false, fmt.Errorf("resource %s: read %s: %w", s.res.ID(), k, err)
	}
	e := change.Entry{UID: item.Get("uid").Str, RV: rv}
	s.log.Debug(currentLine, "resource", s.res.ID(), "object", k.String(), "uid", e.UID, "resourceVersion", rv.String())
	return e, true, nil
}

// ClusterIdentity is the cluster's identity: the uid of its kube-system namespace, which
// the apiserver creates once per etcd and a restore keeps, but a cluster rebuilt under
// the same name does not. It LISTs namespaces narrowed to kube-system (list is the verb
// kube-cdc is granted). "" and the error when it cannot read it (a user without list on
// namespaces): the caller then goes on without the check.
//
// A refusal names the permission missing, as `kube-cdc check` does: forbidden, list on
// namespaces (cluster-wide), with the apiserver's message (which names the user).
func ClusterIdentity(ctx context.Context, c *Clients) (string, error) {
	body, err := do(ctx, c.list.Get().AbsPath("/api/v1/namespaces").
		Param("limit", "1").Param("fieldSelector", "metadata.name=kube-system"))
	switch {
	case apierrors.IsForbidden(err):
		return "", fmt.Errorf("read the kube-system namespace: forbidden: list namespaces (cluster-wide) not allowed: %w", err)
	case err != nil:
		return "", fmt.Errorf("read the kube-system namespace: %w", err)
	}
	return gjson.GetBytes(body, "items.0.metadata.uid").Str, nil
}
