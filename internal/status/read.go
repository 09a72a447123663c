package status

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/metrics"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
)

// ScopedResource is one configured resource and scope, as the command resolved it, for the sinks
// that keep their checkpoints in a store (Kafka, stdout).
type ScopedResource struct {
	Resource change.Resource
	Scope    Scope
	Owns     func(change.Key) bool // the keys of the scope; nil: every key
}

// Stores open what status reads of a PostgreSQL sink; the command wires them, so that
// status imports no PostgreSQL sink.
type Stores struct {
	// Open opens the read store of a postgres sink of cfg (store.Open, read only); release
	// ends the caller's use of it (closing it, unless the store is shared: the web UI's).
	Open func(ctx context.Context, cfg *config.Config, sc config.Sink) (s *store.Store, release func(), err error)
	// JoinCounts counts the actor join since a moment through a store (the audit
	// store's counts), into an Audit's counts; used when cfg has an audit input.
	JoinCounts func(ctx context.Context, s *store.Store, since time.Time) (Audit, error)
}

// Read reads every configured sink's checkpoints and counts, and asks the running daemon
// (AskDaemon) about the resources it does not stream. scopes are the configured scopes
// by id; targets resolves the configured resources, called once, and only when a sink
// keeps its checkpoints in a store. PostgreSQL sinks (and the audit counts) are read
// through stores: the command `status` opens a read-only pool of its own per sink, the
// web UI hands its own in. It writes nothing.
func Read(ctx context.Context, cfg *config.Config, scopes map[string]Scope, targets func() ([]ScopedResource, error), stores Stores) (*Report, error) {
	r := &Report{Cluster: cfg.Cluster, Sinks: []Sink{}}
	var resolved []ScopedResource
	for _, sc := range cfg.Sinks {
		if sc.Type == config.SinkPostgres {
			s, err := postgresStatus(ctx, cfg, sc, scopes, stores)
			if err != nil {
				return nil, err
			}
			r.Sinks = append(r.Sinks, s)
			continue
		}
		if resolved == nil {
			var err error
			if resolved, err = targets(); err != nil {
				return nil, err
			}
		}
		s, err := storeStatus(ctx, cfg, sc, resolved)
		if err != nil {
			return nil, err
		}
		r.Sinks = append(r.Sinks, s)
	}
	r.Daemon = AskDaemon(ctx, cfg.Metrics.Address, scopes)
	r.Audit = readAudit(ctx, cfg, time.Now(), stores)
	return r, nil
}

// ScopeOf is the content of the scope with id (nil when the configuration does not name
// it).
func ScopeOf(scopes map[string]Scope, id string) *Scope {
	sc, ok := scopes[id]
	if !ok {
		return nil
	}
	return &sc
}

// postgresStatus reads the sink's own tables: checkpoints with their time and epoch,
// object counts, the changes in quarantine that no later version has replaced, and the
// running kube-cdc processes that hold and wait for its writer lock.
func postgresStatus(ctx context.Context, cfg *config.Config, sc config.Sink, scopes map[string]Scope, stores Stores) (Sink, error) {
	out := Sink{Name: sc.Name, Type: sc.Type, CheckpointStore: "postgres", Resources: []resourceStatus{}}
	s, release, err := stores.Open(ctx, cfg, sc)
	if err != nil {
		return out, err
	}
	defer release()
	rows, err := s.Status(ctx)
	if err != nil {
		return out, fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	quarantined, err := s.QuarantinedChanges(ctx, QuarantineList)
	if err != nil {
		return out, fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	for _, row := range rows {
		if row.Sink != sc.Name {
			continue // another sink's, in a schema two sinks share
		}
		res := change.Resource{Group: row.Group, Resource: row.Resource}
		updated := row.UpdatedAt
		rs := resourceStatus{
			Resource: res.ID(), Scope: ScopeOf(scopes, row.Scope), ScopeID: row.Scope,
			Checkpoint: checkpointStatus{ResourceVersion: row.Checkpoint.String(), UpdatedAt: &updated, Epoch: row.Epoch},
			Objects:    objectCounts{Live: row.Live, Deleted: ptr(row.Deleted), Quarantined: ptr(row.Quarantined)},
			History:    &historyCounts{Skipped: row.HistorySkipped},
		}
		if row.Epoch > 0 {
			tt := &timeTravel{Reason: row.EpochReason}
			if !row.EpochSince.IsZero() {
				since := row.EpochSince
				tt.DetectedAt = &since
			}
			rs.Checkpoint.TimeTravel = tt
		}
		for _, q := range quarantined {
			if q.Group == row.Group && q.Resource == row.Resource {
				at := q.QuarantinedAt
				rs.Quarantined = append(rs.Quarantined, quarantinedChange{Namespace: q.Key.Namespace, Name: q.Key.Name,
					UID: q.UID, ResourceVersion: q.RV.String(), Op: q.Op, Reason: q.Reason, QuarantinedAt: &at})
			}
		}
		out.Resources = append(out.Resources, rs)
	}
	ws, err := s.Writers(ctx)
	if err != nil {
		return out, fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	out.WriterLock = &writerLock{Waiters: []writerStatus{}}
	for _, wr := range ws {
		st := writerStatus{Application: wr.Application, BackendPID: wr.PID, Client: wr.Client}
		if !wr.Since.IsZero() {
			since := wr.Since
			st.ConnectedAt = &since
		}
		if wr.Holds && out.WriterLock.Holder == nil {
			out.WriterLock.Holder = &st
		} else {
			out.WriterLock.Waiters = append(out.WriterLock.Waiters, st)
		}
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

// storeStatus reads a kafka or stdout sink's checkpoint store: the checkpoint and the
// number of live keys per configured resource (the store keeps no times or tombstones).
// For a kafka sink it also counts and names the quarantined changes no later version
// replaced (kafkaQuarantine).
func storeStatus(ctx context.Context, cfg *config.Config, sc config.Sink, targets []ScopedResource) (Sink, error) {
	out := Sink{Name: sc.Name, Type: sc.Type, CheckpointStore: sc.Checkpoint.Type, Resources: []resourceStatus{}}
	var (
		store      checkpoint.Store
		closeStore = func() {}
		note       string
		err        error
	)
	switch {
	case strings.EqualFold(sc.Checkpoint.Type, checkpoint.TypeFile):
		// Read only, or the running daemon's copy: never the writer's lock (filestore.go).
		store, closeStore, note, err = readFileStore(ctx, cfg, sc)
	case sc.Type == config.SinkKafka:
		store, err = kafka.ReadCheckpoint(ctx, cfg.Cluster, *sc.Kafka, sc.Checkpoint) // creates no topic
		if err == nil {
			closeStore = func() { store.Close() }
		}
	default:
		store, err = checkpoint.Open(sc.Checkpoint) // none, or a type this sink cannot use
	}
	if err != nil {
		return out, fmt.Errorf("sink %s: checkpoint: %w", sc.Name, err) // as run says it
	}
	if store == (checkpoint.None{}) {
		out.CheckpointStore = "none"
		return out, nil
	}
	defer closeStore()
	if note != "" {
		out.Errors = append(out.Errors, note)
	}
	type quarantine struct {
		q   map[change.Key]kafka.QuarantinedRecord
		err error
	}
	read := map[string]quarantine{} // by resource: its scopes share one dead-letter topic
	for _, t := range targets {
		ck, err := store.Load(ctx, sc.Name, t.Resource)
		if err != nil {
			return out, fmt.Errorf("sink %s: %s: %w", sc.Name, t.Resource.ID(), err)
		}
		r, ok := read[t.Resource.ID()]
		if !ok {
			r.q, r.err = kafkaQuarantine(ctx, cfg, sc, t.Resource)
			read[t.Resource.ID()] = r
			if r.err != nil {
				out.Errors = append(out.Errors, r.err.Error())
			}
		}
		var held []kafka.QuarantinedRecord
		owns, content := t.Owns, t.Scope
		rs := resourceStatus{Resource: t.Resource.ID(), Scope: &content, ScopeID: t.Resource.Scope,
			Checkpoint: checkpointStatus{ResourceVersion: ck.String()}}
		if err := store.KeyIndex(ctx, sc.Name, t.Resource, func(k change.Key, e change.Entry) error {
			if owns == nil || owns(k) {
				rs.Objects.Live++
				if qr, ok := r.q[k]; ok && qr.UID == e.UID && qr.Version().Compare(e.Version()) == 0 {
					held = append(held, qr) // the key's record is still the stub
				}
			}
			return nil
		}); err != nil {
			return out, fmt.Errorf("sink %s: %s: %w", sc.Name, t.Resource.ID(), err)
		}
		if r.err == nil && r.q != nil {
			rs.Objects.Quarantined = ptr(int64(len(held)))
			slices.SortFunc(held, func(a, b kafka.QuarantinedRecord) int { return strings.Compare(a.Key.String(), b.Key.String()) })
			for i, qr := range held {
				if i == QuarantineList {
					break
				}
				rs.Quarantined = append(rs.Quarantined, quarantinedChange{Namespace: qr.Key.Namespace, Name: qr.Key.Name,
					UID: qr.UID, ResourceVersion: qr.RV.String(), Op: qr.Op, Reason: qr.Reason, Bytes: qr.Size, Topic: qr.Topic})
			}
		}
		out.Resources = append(out.Resources, rs)
	}
	return out, nil
}

// Bounds of what status reads and prints of a Kafka sink's quarantine.
const (
	statusDeadLetterTail = 1000 // records read from the end of each dead-letter partition
	QuarantineList       = 20   // changes named per resource
)

// kafkaQuarantine reads the newest dead-letter record per key of res for a kafka sink
// (the last statusDeadLetterTail records of each partition); nil for other sinks.
func kafkaQuarantine(ctx context.Context, cfg *config.Config, sc config.Sink, res change.Resource) (map[change.Key]kafka.QuarantinedRecord, error) {
	if sc.Type != config.SinkKafka {
		return nil, nil
	}
	q, err := kafka.ReadQuarantine(ctx, cfg.Cluster, *sc.Kafka, res, statusDeadLetterTail)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %s: quarantine unknown: %w", sc.Name, res.ID(), err)
	}
	return q, nil
}

// AskDaemon asks the running daemon which resources it does not stream now, and why
// (RBAC revoked, a CRD not served). Only the daemon knows this, as its streams meet it,
// and it changes by itself (permissions granted, a CRD created), so status asks the
// daemon's metrics endpoint (/resources) rather than reading a record in the sinks, which would go stale the moment the daemon stopped. metrics.address
// (or --metrics-address host:port), address here, says where; a wildcard host means
// this machine.
func AskDaemon(ctx context.Context, address string, scopes map[string]Scope) Daemon {
	d := Daemon{Degraded: []degradedResource{}, AccessDenied: []accessDenial{}}
	if address == "" {
		d.Error = "metrics.address is not set, and status asks the running kube-cdc at that address"
		return d
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		d.Error = fmt.Sprintf("metrics.address %q: %v", address, err)
		return d
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	d.URL = "http://" + net.JoinHostPort(host, port) + "/resources"
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var answer struct {
		metrics.ResourcesAnswer
		Streaming *bool `json:"streaming"` // absent from daemons before it: they streamed when they answered
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL, nil)
	if err == nil {
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err == nil {
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s", resp.Status)
			} else {
				err = json.NewDecoder(resp.Body).Decode(&answer)
			}
		}
	}
	if err != nil {
		d.Error = fmt.Sprintf("no kube-cdc answers at %s: %v", d.URL, err)
		return d
	}
	d.Reachable = true
	d.Streaming = answer.Streaming == nil || *answer.Streaming
	for _, g := range answer.Degraded {
		d.Degraded = append(d.Degraded, degradedResource{Resource: g.Resource, Scope: ScopeOf(scopes, g.Scope), ScopeID: g.Scope,
			Reason: g.Reason, Error: g.Error, Since: g.Since})
	}
	for _, a := range answer.AccessDenied { // absent from daemons before it
		d.AccessDenied = append(d.AccessDenied, accessDenial{Resource: a.Resource, Scope: ScopeOf(scopes, a.Scope), ScopeID: a.Scope,
			Denied: a.Denied, Error: a.Error, Since: a.Since})
	}
	if s := answer.SignalsDenied; s != nil {
		d.SignalsDenied = &signalsDenial{ConfigMap: s.ConfigMap, Denied: s.Denied, Error: s.Error, Since: s.Since}
	}
	return d
}

// Answers says whether a kube-cdc answers at address (AskDaemon reached it).
func Answers(ctx context.Context, address string) bool { return AskDaemon(ctx, address, nil).Reachable }
