package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Report is everything `kube-cdc status` shows. The table is drawn from it, and
// -o json and -o yaml print it as it is: its field names are a contract for scripts
// (docs/operations.md, "kube-cdc status"), camelCase as kubectl's, times in RFC 3339,
// resource versions as strings (as in Kubernetes objects).
type Report struct {
	Cluster string `json:"cluster"`
	Sinks   []Sink `json:"sinks"`
	// Daemon is what the running kube-cdc answers about the resources it does not stream
	// now (its metrics endpoint's /resources).
	Daemon Daemon `json:"daemon"`
	// Audit is how the actor join went, when an audit input is configured (audit.go).
	Audit *Audit `json:"audit,omitempty"`
}

// Sink is one configured sink.
type Sink struct {
	Name string `json:"name"`
	Type string `json:"type"` // postgres | kafka | stdout
	// CheckpointStore is where the sink's checkpoints are: postgres (its own tables), file,
	// kafka, or none (the sink relists at every start and has no resources here).
	CheckpointStore string `json:"checkpointStore"`
	// Resources: one per checkpoint (PostgreSQL: every checkpoint of the cluster in the
	// schema) or per configured resource and scope (other sinks).
	Resources []resourceStatus `json:"resources"`
	// WriterLock names the kube-cdc processes that hold and wait for a PostgreSQL sink's
	// writer lock; absent for other sinks.
	WriterLock *writerLock `json:"writerLock,omitempty"`
	// Errors are what status could not read (a Kafka dead-letter topic); the rest is shown.
	Errors []string `json:"errors,omitempty"`
}

// resourceStatus is one resource and scope of a sink.
type resourceStatus struct {
	Resource string `json:"resource"` // plural, or plural.group: "configmaps", "deployments.apps"
	// Scope is the subset of the resource this checkpoint covers: empty fields for the
	// whole resource; null when the configuration status loaded does not name the scope
	// (a scope removed from it), of which only ScopeID is known.
	Scope *Scope `json:"scope"`
	// ScopeID is the short digest of the scope's content that checkpoints, metrics and logs
	// key the scope by; "" for the whole resource.
	ScopeID    string           `json:"scopeId,omitempty"`
	Checkpoint checkpointStatus `json:"checkpoint"`
	Objects    objectCounts     `json:"objects"`
	// Quarantined names the changes the sink could not store whose keys no later version
	// replaced (at most QuarantineList per resource).
	Quarantined []quarantinedChange `json:"quarantined,omitempty"`
	// History is what a PostgreSQL sink left out of its changes table (absent for other
	// sinks).
	History *historyCounts `json:"history,omitempty"`
}

// historyCounts are a PostgreSQL sink's counts of the resource's history, per scope.
type historyCounts struct {
	// Skipped counts the versions written to objects but not to changes because only
	// ignored paths changed (resources[].history.ignorePaths), since the sink began.
	Skipped int64 `json:"skipped"`
}

// checkpointStatus is where the resource's stream resumes.
type checkpointStatus struct {
	ResourceVersion string `json:"resourceVersion"` // "" when there is none yet
	// UpdatedAt is when the checkpoint last moved or was rewritten (PostgreSQL sinks; the
	// other stores keep no time).
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
	// Epoch counts the times the cluster went back in time (an etcd restore, a rebuilt
	// cluster) as this sink saw it; TimeTravel says what revealed the last one.
	Epoch      int         `json:"epoch"`
	TimeTravel *timeTravel `json:"timeTravel,omitempty"`
}

type timeTravel struct {
	Reason     string     `json:"reason,omitempty"`
	DetectedAt *time.Time `json:"detectedAt,omitempty"`
}

// objectCounts are a PostgreSQL sink's counts of the whole resource (all its scopes), or
// a checkpoint store's count of the scope's live keys. A count the sink does not keep is
// absent.
type objectCounts struct {
	Live        int64  `json:"live"`
	Deleted     *int64 `json:"deleted,omitempty"`     // tombstones (PostgreSQL)
	Quarantined *int64 `json:"quarantined,omitempty"` // unreplaced quarantined changes (PostgreSQL, Kafka)
}

type quarantinedChange struct {
	Namespace       string     `json:"namespace,omitempty"`
	Name            string     `json:"name"`
	UID             string     `json:"uid"`
	ResourceVersion string     `json:"resourceVersion"`
	Op              string     `json:"op"`
	Reason          string     `json:"reason"`
	Bytes           int        `json:"bytes,omitempty"`         // the record's size (Kafka)
	Topic           string     `json:"topic,omitempty"`         // the dead-letter topic holding the change (Kafka)
	QuarantinedAt   *time.Time `json:"quarantinedAt,omitempty"` // (PostgreSQL)
}

type writerLock struct {
	Holder  *writerStatus  `json:"holder"`  // null: no running kube-cdc writes the sink
	Waiters []writerStatus `json:"waiters"` // processes started with --wait
}

type writerStatus struct {
	Application string     `json:"application"` // "kube-cdc/<host>/<pid>" unless the DSN sets one
	BackendPID  int        `json:"backendPid"`
	Client      string     `json:"client,omitempty"`
	ConnectedAt *time.Time `json:"connectedAt,omitempty"`
}

// Daemon is the running daemon's answer, or why there is none.
type Daemon struct {
	URL       string `json:"url,omitempty"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"` // why the resources' state is unknown
	// Streaming is false when the daemon that answered does not stream now (a standby
	// waiting for the lease, or still starting): Degraded then says nothing.
	Streaming bool `json:"streaming"`
	// Degraded are the resources (and scopes) the daemon does not stream now; never null.
	Degraded []degradedResource `json:"degraded"`
	// AccessDenied are the resources (and scopes) the daemon streams but may no longer
	// list or watch (its periodic access review): their next re-watch or relist will fail
	// and degrade them. Never null when the daemon answered.
	AccessDenied []accessDenial `json:"accessDenied"`
	// SignalsDenied is the signal ConfigMap the daemon may not read or write, so
	// `kube-cdc resnapshot` goes unanswered; null when it is answered.
	SignalsDenied *signalsDenial `json:"signalsDenied"`
}

type signalsDenial struct {
	ConfigMap string    `json:"configMap"` // namespace/name
	Denied    []string  `json:"denied"`    // of get, list, watch, update
	Error     string    `json:"error"`
	Since     time.Time `json:"since"`
}

type accessDenial struct {
	Resource string    `json:"resource"`
	Scope    *Scope    `json:"scope"`
	ScopeID  string    `json:"scopeId,omitempty"`
	Denied   []string  `json:"denied"` // list, watch
	Error    string    `json:"error"`
	Since    time.Time `json:"since"`
}

type degradedResource struct {
	Resource string    `json:"resource"`
	Scope    *Scope    `json:"scope"`
	ScopeID  string    `json:"scopeId,omitempty"`
	Reason   string    `json:"reason"` // forbidden, not served, …
	Error    string    `json:"error"`
	Since    time.Time `json:"since"`
}

// Scope is what a configured resource entry narrows the resource to.
type Scope struct {
	Namespaces    []string `json:"namespaces"` // empty: every namespace
	LabelSelector string   `json:"labelSelector,omitempty"`
	FieldSelector string   `json:"fieldSelector,omitempty"`
}

// ScopeColumn is the SCOPE column: "all" for the whole resource, else the namespaces and
// selectors, else (content unknown) the scope's id.
func ScopeColumn(sc *Scope, id string) string {
	if sc == nil {
		return "id " + id + " (not in this config)"
	}
	var parts []string
	switch len(sc.Namespaces) {
	case 0:
	case 1:
		parts = append(parts, "namespace="+sc.Namespaces[0])
	default:
		parts = append(parts, "namespaces="+strings.Join(sc.Namespaces, ","))
	}
	if sc.LabelSelector != "" {
		parts = append(parts, "labels="+sc.LabelSelector)
	}
	if sc.FieldSelector != "" {
		parts = append(parts, "fields="+sc.FieldSelector)
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}

// formats are the values of status's --output.
var formats = []string{"table", "json", "yaml"}

func CheckFormat(f string) error {
	for _, ok := range formats {
		if f == ok {
			return nil
		}
	}
	return fmt.Errorf("--output (-o) %q: want one of %s", f, strings.Join(formats, ", "))
}

// Write prints r in format (one of formats); now is the time ages are
// measured from.
func Write(w io.Writer, r *Report, format string, now time.Time) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	case "yaml":
		b, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	writeTable(w, r, now)
	return nil
}

// writeTable prints one row per sink, resource and scope, then lines naming what a
// row cannot hold: time travels, quarantined changes, read errors, the writers of each
// PostgreSQL sink, then the resources the daemon does not stream.
func writeTable(out io.Writer, r *Report, now time.Time) {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SINK\tRESOURCE\tSCOPE\tCHECKPOINT\tAGE\tLIVE\tDELETED\tQUARANTINED")
	var lines []string
	for _, s := range r.Sinks {
		if s.CheckpointStore == "none" {
			fmt.Fprintf(w, "%s\t(no checkpoint store: relists at every start)\t\t\t\t\t\t\n", s.Name)
		}
		for _, res := range s.Resources {
			scope := ScopeColumn(res.Scope, res.ScopeID)
			rv, _ := strconv.ParseUint(res.Checkpoint.ResourceVersion, 10, 64)
			age := "-"
			if t := res.Checkpoint.UpdatedAt; t != nil {
				age = now.Sub(*t).Round(time.Second).String()
			}
			quarantined := countColumn(res.Objects.Quarantined)
			if res.Objects.Quarantined == nil && s.Type == "kafka" {
				quarantined = "?" // its dead-letter topic could not be read: s.Errors says why
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", s.Name, res.Resource, scope, rv, age,
				res.Objects.Live, countColumn(res.Objects.Deleted), quarantined)
			if c := res.Checkpoint; c.Epoch > 0 {
				line := fmt.Sprintf("sink %s: %s %s: epoch %d: the cluster went back in time (an etcd restore?)", s.Name, res.Resource, scope, c.Epoch)
				if tt := c.TimeTravel; tt != nil && tt.Reason != "" && tt.DetectedAt != nil {
					line += fmt.Sprintf(", found %s (%s)", tt.DetectedAt.UTC().Format(time.RFC3339), tt.Reason)
				}
				lines = append(lines, line)
			}
			if h := res.History; h != nil && h.Skipped > 0 {
				lines = append(lines, fmt.Sprintf("sink %s: %s %s: %d versions left out of changes as noise (only ignored paths changed: history.ignorePaths)",
					s.Name, res.Resource, scope, h.Skipped))
			}
			lines = append(lines, quarantineLines(s.Name, res)...)
		}
		lines = append(lines, s.Errors...)
		if l := s.WriterLock; l != nil {
			if l.Holder == nil && len(l.Waiters) == 0 {
				lines = append(lines, fmt.Sprintf("sink %s: no running kube-cdc writes it", s.Name))
			}
			if l.Holder != nil {
				lines = append(lines, fmt.Sprintf("sink %s: written by %s", s.Name, l.Holder.describe(true)))
			}
			for _, wr := range l.Waiters {
				lines = append(lines, fmt.Sprintf("sink %s: waiting to take over (--wait): %s", s.Name, wr.describe(false)))
			}
		}
	}
	w.Flush()
	for _, line := range lines {
		fmt.Fprintln(out, line)
	}
	for _, line := range daemonLines(r.Daemon, now) {
		fmt.Fprintln(out, line)
	}
	for _, line := range auditLines(r.Audit, now) {
		fmt.Fprintln(out, line)
	}
}

func countColumn(n *int64) string {
	if n == nil {
		return "-"
	}
	return strconv.FormatInt(*n, 10)
}

// quarantineLines names the quarantined changes of res still standing, and says how many
// more there are when the list stops short of the count.
func quarantineLines(sink string, res resourceStatus) []string {
	var lines []string
	for _, q := range res.Quarantined {
		key := q.Name
		if q.Namespace != "" {
			key = q.Namespace + "/" + q.Name
		}
		if q.Topic != "" {
			lines = append(lines, fmt.Sprintf("sink %s: quarantined %s %s uid %s rv %s (%d bytes): %s; the change is in %s",
				sink, res.Resource, key, q.UID, q.ResourceVersion, q.Bytes, q.Reason, q.Topic))
		} else {
			lines = append(lines, fmt.Sprintf("sink %s: quarantined %s %s uid %s rv %s (%s): %s; the change is in the quarantine table",
				sink, res.Resource, key, q.UID, q.ResourceVersion, q.Op, q.Reason))
		}
	}
	if n := res.Objects.Quarantined; n != nil && int(*n) > len(res.Quarantined) && len(res.Quarantined) > 0 {
		where := "the quarantine table"
		if t := res.Quarantined[0].Topic; t != "" {
			where = "dead-letter topic " + t
		}
		lines = append(lines, fmt.Sprintf("sink %s: %s: %d more quarantined (%s)", sink, res.Resource, int(*n)-len(res.Quarantined), where))
	}
	return lines
}

func (w writerStatus) describe(holds bool) string {
	var b strings.Builder
	b.WriteString(w.Application)
	if w.Application == "" {
		b.WriteString("?")
	}
	fmt.Fprintf(&b, " (backend pid %d", w.BackendPID)
	if w.Client != "" {
		b.WriteString(", from " + w.Client)
	}
	if holds {
		b.WriteString(", holds the writer lock")
	} else {
		b.WriteString(", waits for the writer lock")
	}
	if w.ConnectedAt != nil {
		b.WriteString(", connected " + w.ConnectedAt.UTC().Format(time.RFC3339))
	}
	b.WriteString(")")
	return b.String()
}

func daemonLines(d Daemon, now time.Time) []string {
	if !d.Reachable {
		return []string{"resources: state unknown: " + d.Error}
	}
	if !d.Streaming {
		return []string{"resources: state unknown: kube-cdc at " + d.URL + " does not stream now (a standby waiting for the lease, or still starting); ask the leader's metrics endpoint"}
	}
	var lines []string
	if len(d.Degraded) == 0 {
		lines = append(lines, "resources: none degraded (kube-cdc at "+d.URL+")")
	}
	for _, g := range d.Degraded {
		id := g.Resource
		if g.ScopeID != "" {
			id += " (scope " + ScopeColumn(g.Scope, g.ScopeID) + ")"
		}
		lines = append(lines, fmt.Sprintf("DEGRADED: resource %s: %s for %s: %s", id, g.Reason,
			now.Sub(g.Since).Round(time.Second), strings.Join(strings.Fields(g.Error), " ")))
	}
	for _, a := range d.AccessDenied {
		id := a.Resource
		if a.ScopeID != "" {
			id += " (scope " + ScopeColumn(a.Scope, a.ScopeID) + ")"
		}
		lines = append(lines, fmt.Sprintf("ACCESS LOST: resource %s: %s denied for %s: %s", id, strings.Join(a.Denied, ", "),
			now.Sub(a.Since).Round(time.Second), strings.Join(strings.Fields(a.Error), " ")))
	}
	if s := d.SignalsDenied; s != nil {
		lines = append(lines, fmt.Sprintf("SIGNALS DENIED: configmap %s: %s denied for %s: %s", s.ConfigMap, strings.Join(s.Denied, ", "),
			now.Sub(s.Since).Round(time.Second), strings.Join(strings.Fields(s.Error), " ")))
	}
	return lines
}
