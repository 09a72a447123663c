package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
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
	return configCommand("status", "Show, per sink and resource, the checkpoint RV, its age and object counts", func(cmd *cobra.Command, cfg *config.Config) error {
		w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
		defer w.Flush()
		fmt.Fprintln(w, "SINK\tRESOURCE\tSCOPE\tCHECKPOINT\tAGE\tLIVE\tDELETED\tQUARANTINED")
		var targets []source.Target // resolved once, for the sinks that need them
		var writers []string        // after the table: who writes each PostgreSQL sink, Kafka's quarantined changes
		for _, sc := range cfg.Sinks {
			if sc.Type == config.SinkPostgres {
				ws, err := postgresStatus(cmd.Context(), w, cfg, sc)
				if err != nil {
					return err
				}
				writers = append(writers, ws...)
				continue
			}
			if targets == nil {
				src, err := connectSource(cfg)
				if err != nil {
					return err
				}
				// As run resolves them: a resource waiting for its CRD still has checkpoints.
				if targets, err = source.ResolveOrWait(src.clients.Discovery, sourceSpecs(cfg)); err != nil {
					return err
				}
			}
			lines, err := storeStatus(cmd.Context(), w, cfg, sc, targets)
			if err != nil {
				return err
			}
			writers = append(writers, lines...)
		}
		w.Flush()
		for _, line := range writers {
			fmt.Fprintln(cmd.OutOrStdout(), line)
		}
		for _, line := range resourceStates(cmd.Context(), cfg) {
			fmt.Fprintln(cmd.OutOrStdout(), line)
		}
		return nil
	})
}

func scopeColumn(scope string) string {
	if scope == "" {
		return "-"
	}
	return scope
}

// postgresStatus reads the sink's own tables: checkpoints with their age, object counts,
// and the changes in quarantine that no later version has replaced. It returns lines
// naming the running kube-cdc process that writes the sink (the holder of its writer
// lock) and those waiting to take over.
func postgresStatus(ctx context.Context, w io.Writer, cfg *config.Config, sc config.Sink) ([]string, error) {
	o := *sc.Postgres
	o.Migrate = false
	s, err := postgres.New(ctx, sc.Name, cfg.Cluster, o, nil)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rows, err := s.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	var lines []string
	for _, r := range rows {
		id := change.Resource{Group: r.Group, Resource: r.Resource}.ID()
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\n", r.Sink, id, scopeColumn(r.Scope), r.Checkpoint,
			time.Since(r.UpdatedAt).Round(time.Second), r.Live, r.Deleted, r.Quarantined)
		if r.Epoch > 0 {
			line := fmt.Sprintf("sink %s: %s %s: epoch %d: the cluster went back in time (an etcd restore?)", r.Sink, id, scopeColumn(r.Scope), r.Epoch)
			if r.EpochReason != "" {
				line += fmt.Sprintf(", found %s (%s)", r.EpochSince.UTC().Format(time.RFC3339), r.EpochReason)
			}
			lines = append(lines, line)
		}
	}
	ws, err := s.Writers(ctx)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	if len(ws) == 0 {
		return append(lines, fmt.Sprintf("sink %s: no running kube-cdc writes it", sc.Name)), nil
	}
	for _, wr := range ws {
		verb := "written by"
		if !wr.Holds {
			verb = "waiting to take over (--wait):"
		}
		lines = append(lines, fmt.Sprintf("sink %s: %s %s", sc.Name, verb, wr))
	}
	return lines, nil
}

// storeStatus reads a kafka or stdout sink's checkpoint store: the checkpoint and the
// number of live keys per configured resource (the store keeps no times or tombstones).
// For a kafka sink it also counts the quarantined changes no later version replaced and
// returns lines naming them (kafkaQuarantine).
func storeStatus(ctx context.Context, w io.Writer, cfg *config.Config, sc config.Sink, targets []source.Target) ([]string, error) {
	var store checkpoint.Store
	var err error
	switch sc.Type {
	case config.SinkKafka:
		store, err = kafka.OpenCheckpoint(ctx, cfg.Cluster, *sc.Kafka, sc.Checkpoint)
	default:
		store, err = openStore(sc)
	}
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w (a running kube-cdc holds a file store's lock)", sc.Name, err)
	}
	if store == (checkpoint.None{}) {
		fmt.Fprintf(w, "%s\t(no checkpoint store: relists at every start)\t\t\t\t\t\t\n", sc.Name)
		return nil, nil
	}
	defer store.Close()
	var lines []string
	type quarantine struct {
		q   map[change.Key]kafka.QuarantinedRecord
		err error
	}
	read := map[string]quarantine{} // by resource: its scopes share one dead-letter topic
	for _, t := range targets {
		ck, err := store.Load(ctx, sc.Name, t.Resource)
		if err != nil {
			return nil, fmt.Errorf("sink %s: %s: %w", sc.Name, t.Resource.ID(), err)
		}
		r, ok := read[t.Resource.ID()]
		if !ok {
			r.q, r.err = kafkaQuarantine(ctx, cfg, sc, t.Resource)
			read[t.Resource.ID()] = r
		}
		q, qerr := r.q, r.err
		var held []kafka.QuarantinedRecord
		owns, live := t.Owns(), 0
		if err := store.KeyIndex(ctx, sc.Name, t.Resource, func(k change.Key, e change.Entry) error {
			if owns == nil || owns(k) {
				live++
				if r, ok := q[k]; ok && r.UID == e.UID && r.RV == e.RV {
					held = append(held, r) // the key's record is still the stub
				}
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("sink %s: %s: %w", sc.Name, t.Resource.ID(), err)
		}
		quarantined := "-"
		switch {
		case qerr != nil:
			quarantined = "?"
			lines = append(lines, qerr.Error())
		case q != nil:
			quarantined = strconv.Itoa(len(held))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t-\t%d\t-\t%s\n", sc.Name, t.Resource.ID(), scopeColumn(t.Resource.Scope), ck, live, quarantined)
		lines = append(lines, quarantineLines(sc.Name, t.Resource, held)...)
	}
	return lines, nil
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

// quarantineLines names the quarantined changes of res still standing as stubs, at most
// statusQuarantineList of them.
func quarantineLines(sink string, res change.Resource, held []kafka.QuarantinedRecord) []string {
	slices.SortFunc(held, func(a, b kafka.QuarantinedRecord) int { return strings.Compare(a.Key.String(), b.Key.String()) })
	var lines []string
	for i, r := range held {
		if i == statusQuarantineList {
			lines = append(lines, fmt.Sprintf("sink %s: %s: %d more quarantined (dead-letter topic %s)", sink, res.ID(), len(held)-i, r.Topic))
			break
		}
		lines = append(lines, fmt.Sprintf("sink %s: quarantined %s %s uid %s rv %d (%d bytes): %s; the change is in %s",
			sink, res.ID(), r.Key, r.UID, r.RV, r.Size, r.Reason, r.Topic))
	}
	return lines
}

// resourceStates are the lines naming the resources the running daemon does not stream
// now, with the reason (RBAC revoked, a CRD not served). Only the daemon knows this, as
// its streams meet it, and it changes by itself (permissions granted, a CRD created), so
// status asks the daemon's metrics endpoint (/resources) rather than reading a record
// in the sinks, which would go stale the moment the daemon stopped. metrics.address
// (or --metrics-address host:port) says where; a wildcard host means this machine.
func resourceStates(ctx context.Context, cfg *config.Config) []string {
	if cfg.Metrics.Address == "" {
		return []string{"resources: state unknown: metrics.address is not set, and status asks the running kube-cdc at that address"}
	}
	host, port, err := net.SplitHostPort(cfg.Metrics.Address)
	if err != nil {
		return []string{fmt.Sprintf("resources: state unknown: metrics.address %q: %v", cfg.Metrics.Address, err)}
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	url := "http://" + net.JoinHostPort(host, port) + "/resources"
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var answer metrics.ResourcesAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
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
		return []string{fmt.Sprintf("resources: state unknown: no kube-cdc answers at %s: %v", url, err)}
	}
	if len(answer.Degraded) == 0 {
		return []string{"resources: none degraded (kube-cdc at " + url + ")"}
	}
	var lines []string
	for _, d := range answer.Degraded {
		id := d.Resource
		if d.Scope != "" {
			id += " (scope " + d.Scope + ")"
		}
		lines = append(lines, fmt.Sprintf("DEGRADED: resource %s: %s for %s: %s", id, d.Reason,
			time.Since(d.Since).Round(time.Second), strings.Join(strings.Fields(d.Error), " ")))
	}
	return lines
}
