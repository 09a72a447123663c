package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/metrics"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

func newStatusCmd() *cobra.Command {
	var output string
	cmd := configCommand("status", "Show, per sink and resource, the checkpoint RV, its age and object counts", func(cmd *cobra.Command, cfg *config.Config) error {
		if err := checkStatusFormat(output); err != nil {
			return err
		}
		r, err := readStatus(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		return writeStatus(cmd.OutOrStdout(), r, output, time.Now())
	})
	cmd.Long = `Show, per sink, resource and scope, the checkpoint (resourceVersion, age, epoch), the
object counts and the quarantined changes; who writes each PostgreSQL sink (its writer
lock's holder and waiters); and, asked of the running kube-cdc at metrics.address, the
resources it does not stream now, and those it streams but may no longer list or watch
(their next re-watch will fail). A scope is shown by its namespaces and selectors.
-o json and -o yaml print the same as a document (field names in docs/operations.md).`
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}

// readStatus reads every configured sink's checkpoints and counts, and asks the running
// daemon about degraded resources.
func readStatus(ctx context.Context, cfg *config.Config) (*statusReport, error) {
	r := &statusReport{Cluster: cfg.Cluster, Sinks: []sinkStatus{}}
	scopes := configuredScopes(cfg)
	var targets []source.Target // resolved once, for the sinks that need them
	for _, sc := range cfg.Sinks {
		if sc.Type == config.SinkPostgres {
			s, err := postgresStatus(ctx, cfg, sc, scopes)
			if err != nil {
				return nil, err
			}
			r.Sinks = append(r.Sinks, s)
			continue
		}
		if targets == nil {
			src, err := connectSource(cfg)
			if err != nil {
				return nil, err
			}
			// As run resolves them: a resource waiting for its CRD still has checkpoints.
			if targets, err = source.ResolveOrWait(src.clients.Discovery, sourceSpecs(cfg)); err != nil {
				return nil, err
			}
		}
		s, err := storeStatus(ctx, cfg, sc, targets)
		if err != nil {
			return nil, err
		}
		r.Sinks = append(r.Sinks, s)
	}
	r.Daemon = daemonState(ctx, cfg, scopes)
	return r, nil
}

// postgresStatus reads the sink's own tables: checkpoints with their time and epoch,
// object counts, the changes in quarantine that no later version has replaced, and the
// running kube-cdc processes that hold and wait for its writer lock.
func postgresStatus(ctx context.Context, cfg *config.Config, sc config.Sink, scopes map[string]scopeContent) (sinkStatus, error) {
	out := sinkStatus{Name: sc.Name, Type: sc.Type, CheckpointStore: "postgres", Resources: []resourceStatus{}}
	o := *sc.Postgres
	o.Migrate = false
	s, err := postgres.New(ctx, sc.Name, cfg.Cluster, o, nil)
	if err != nil {
		return out, err
	}
	defer s.Close()
	rows, err := s.Status(ctx)
	if err != nil {
		return out, fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	quarantined, err := s.QuarantinedChanges(ctx, statusQuarantineList)
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
			Resource: res.ID(), Scope: scopeOf(scopes, row.Scope), ScopeID: row.Scope,
			Checkpoint: checkpointStatus{ResourceVersion: row.Checkpoint.String(), UpdatedAt: &updated, Epoch: row.Epoch},
			Objects:    objectCounts{Live: row.Live, Deleted: ptr(row.Deleted), Quarantined: ptr(row.Quarantined)},
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
func storeStatus(ctx context.Context, cfg *config.Config, sc config.Sink, targets []source.Target) (sinkStatus, error) {
	out := sinkStatus{Name: sc.Name, Type: sc.Type, CheckpointStore: sc.Checkpoint.Type, Resources: []resourceStatus{}}
	var store checkpoint.Store
	var err error
	switch sc.Type {
	case config.SinkKafka:
		store, err = kafka.OpenCheckpoint(ctx, cfg.Cluster, *sc.Kafka, sc.Checkpoint)
	default:
		store, err = openStore(sc)
	}
	if err != nil {
		return out, fmt.Errorf("sink %s: %w (a running kube-cdc holds a file store's lock)", sc.Name, err)
	}
	if store == (checkpoint.None{}) {
		out.CheckpointStore = "none"
		return out, nil
	}
	defer store.Close()
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
		owns := t.Owns()
		content := contentOf(t.Scope())
		rs := resourceStatus{Resource: t.Resource.ID(), Scope: &content, ScopeID: t.Resource.Scope,
			Checkpoint: checkpointStatus{ResourceVersion: ck.String()}}
		if err := store.KeyIndex(ctx, sc.Name, t.Resource, func(k change.Key, e change.Entry) error {
			if owns == nil || owns(k) {
				rs.Objects.Live++
				if qr, ok := r.q[k]; ok && qr.UID == e.UID && qr.RV == e.RV && qr.Epoch == e.Epoch {
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
				if i == statusQuarantineList {
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
	statusQuarantineList = 20   // changes named per resource
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

// daemonState asks the running daemon which resources it does not stream now, and why
// (RBAC revoked, a CRD not served). Only the daemon knows this, as its streams meet it,
// and it changes by itself (permissions granted, a CRD created), so status asks the daemon's metrics endpoint (/resources) rather than reading a record
// in the sinks, which would go stale the moment the daemon stopped. metrics.address
// (or --metrics-address host:port) says where; a wildcard host means this machine.
func daemonState(ctx context.Context, cfg *config.Config, scopes map[string]scopeContent) daemonStatus {
	d := daemonStatus{Degraded: []degradedResource{}, AccessDenied: []accessDenial{}}
	if cfg.Metrics.Address == "" {
		d.Error = "metrics.address is not set, and status asks the running kube-cdc at that address"
		return d
	}
	host, port, err := net.SplitHostPort(cfg.Metrics.Address)
	if err != nil {
		d.Error = fmt.Sprintf("metrics.address %q: %v", cfg.Metrics.Address, err)
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
		d.Degraded = append(d.Degraded, degradedResource{Resource: g.Resource, Scope: scopeOf(scopes, g.Scope), ScopeID: g.Scope,
			Reason: g.Reason, Error: g.Error, Since: g.Since})
	}
	for _, a := range answer.AccessDenied { // absent from daemons before it
		d.AccessDenied = append(d.AccessDenied, accessDenial{Resource: a.Resource, Scope: scopeOf(scopes, a.Scope), ScopeID: a.Scope,
			Denied: a.Denied, Error: a.Error, Since: a.Since})
	}
	return d
}

// configuredScopes maps the id of every scope the configuration's resources give to its
// content. A checkpoint names its scope by that id, a digest which says nothing to a
// reader; the ids are a function of the configuration alone (source.ScopesOf), and
// status loads the configuration anyway to find the sinks, so it shows the content
// instead, without asking the cluster. A checkpoint whose scope the configuration does
// not name (a scope removed, whose checkpoint the next relist forgets) is shown by its
// id. The id does not depend on the resource, so one map serves every resource.
func configuredScopes(cfg *config.Config) map[string]scopeContent {
	out := map[string]scopeContent{"": {Namespaces: []string{}}}
	for _, s := range sourceSpecs(cfg) {
		for _, sc := range source.ScopesOf(s) {
			out[sc.ID] = contentOf(sc)
		}
	}
	return out
}

func contentOf(sc source.Scope) scopeContent {
	ns := sc.Namespaces
	if ns == nil {
		ns = []string{}
	}
	return scopeContent{Namespaces: ns, LabelSelector: sc.LabelSelector, FieldSelector: sc.FieldSelector}
}

// scopeOf is the content of the scope with id (nil when the configuration does not name
// it).
func scopeOf(scopes map[string]scopeContent, id string) *scopeContent {
	sc, ok := scopes[id]
	if !ok {
		return nil
	}
	return &sc
}
