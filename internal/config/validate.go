package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kube-cdc/kube-cdc/internal/ignorepaths"
	"github.com/kube-cdc/kube-cdc/internal/sinks/stdout"
)

// Validate checks c as Load leaves it (defaults filled) and returns the first problem as
// an *Error naming its key.
func (c *Config) Validate() error {
	for _, check := range []func() error{
		c.validateTop, c.validateKubernetes, c.validateResources, c.validateTransforms,
		c.validatePipeline, c.validateSinks, c.validateLog, c.validateLeaderElection, c.validateUI,
		c.validateAudit,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateTop() error {
	if strings.TrimSpace(c.Cluster) == "" {
		return keyErrorf("cluster", "required")
	}
	if c.Metrics.Address != "" {
		if err := checkAddress(c.Metrics.Address); err != nil {
			return keyErrorf("metrics.address", "%v", err)
		}
	}
	return nil
}

var listModes = []string{"auto", "stream", "paged"}

func checkAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port or :port, got %q", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("bad port %q in %q", port, addr)
	}
	return nil
}

func (c *Config) validateKubernetes() error {
	k := c.Kubernetes
	switch {
	case k.QPS <= 0:
		return keyErrorf("kubernetes.qps", "must be greater than 0, got %v", k.QPS)
	case k.Burst <= 0:
		return keyErrorf("kubernetes.burst", "must be greater than 0, got %d", k.Burst)
	case k.PageSize <= 0:
		return keyErrorf("kubernetes.pageSize", "must be greater than 0, got %d", k.PageSize)
	case !contains(listModes, k.ListMode):
		return keyErrorf("kubernetes.listMode", "unknown list mode %q (want %s)", k.ListMode, strings.Join(listModes, ", "))
	case k.RelistJitter < 0:
		return keyErrorf("kubernetes.relistJitter", "must not be negative (0 relists at once), got %v", k.RelistJitter)
	case k.AccessCheckInterval < 0:
		return keyErrorf("kubernetes.accessCheckInterval", "must not be negative (0 turns the check off), got %v", k.AccessCheckInterval)
	}
	return nil
}

func (c *Config) validateResources() error {
	if len(c.Resources) == 0 {
		return keyErrorf("resources", "empty list")
	}
	seen := map[string]int{}
	for i, r := range c.Resources {
		key := fmt.Sprintf("resources[%d]", i)
		if strings.TrimSpace(r.Name) == "" {
			return keyErrorf(key+".name", "required")
		}
		if strings.Count(r.Name, "/") > 2 {
			return keyErrorf(key+".name", "%q: want a plural, plural.group, version/resource (core group) or group/version/resource", r.Name)
		}
		for j, ns := range r.Namespaces {
			if strings.TrimSpace(ns) == "" {
				return keyErrorf(fmt.Sprintf("%s.namespaces[%d]", key, j), "empty namespace name")
			}
		}
		if _, err := labels.Parse(r.LabelSelector); err != nil {
			return keyErrorf(key+".labelSelector", "%v", err)
		}
		if _, err := fields.ParseSelector(r.FieldSelector); err != nil {
			return keyErrorf(key+".fieldSelector", "%v", err)
		}
		for j, p := range r.History.IgnorePaths {
			if err := ignorepaths.Validate(p); err != nil {
				return keyErrorf(fmt.Sprintf("%s.history.ignorePaths[%d]", key, j), "%v", err)
			}
		}
		id := r.Name + "|" + strings.Join(r.Namespaces, ",") + "|" + r.LabelSelector + "|" + r.FieldSelector
		if prev, dup := seen[id]; dup {
			return keyErrorf(key, "duplicate of resources[%d]", prev)
		}
		seen[id] = i
	}
	return nil
}

func (c *Config) validateTransforms() error {
	t := &c.Transforms
	for i, p := range t.Drop {
		if p == "" || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
			return keyErrorf(fmt.Sprintf("transforms.drop[%d]", i), "%q is not a JSON path like \"metadata.annotations.foo\"", p)
		}
	}
	// No message below shows the key, or a part of it.
	t.fileKey = nil
	if t.DigestKeyFile != "" {
		if t.DigestKey != "" {
			// One of them may come from the environment, out of sight of the file.
			return keyErrorf("transforms.digestKeyFile", "set %s or %s, not both", c.named("transforms.digestKey"), c.named("transforms.digestKeyFile"))
		}
		b, err := os.ReadFile(t.DigestKeyFile)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return keyErrorf("transforms.digestKeyFile", "%s: %v", t.DigestKeyFile, err)
		}
		t.fileKey = bytes.TrimRight(b, "\r\n")
		if len(t.fileKey) == 0 {
			return keyErrorf("transforms.digestKeyFile", "%s holds no key", t.DigestKeyFile)
		}
	}
	if k := t.Key(); len(k) > 0 && len(k) < MinDigestKeyBytes {
		key := "transforms.digestKey"
		if t.DigestKeyFile != "" {
			key = "transforms.digestKeyFile"
		}
		return keyErrorf(key, "the digest key is %d bytes, want at least %d random bytes (e.g. `openssl rand -hex 32`)", len(k), MinDigestKeyBytes)
	}
	if t.RedactSecrets && len(t.Key()) == 0 {
		// Without a key a Secret would be digested unkeyed, which a dictionary of weak
		// values reverses: refuse to start rather than write such digests.
		for i, r := range c.Resources {
			if NamesSecrets(r.Name) {
				return keyErrorf("transforms.digestKey", "required while transforms.redactSecrets is true and resources[%d] (%q) streams Secrets; set KUBE_CDC_TRANSFORMS__DIGESTKEY (at least %d random bytes) or transforms.digestKeyFile", i, r.Name, MinDigestKeyBytes)
			}
		}
	}
	return nil
}

func (c *Config) validatePipeline() error {
	p := c.Pipeline
	switch {
	case p.BatchSize <= 0:
		return keyErrorf("pipeline.batchSize", "must be greater than 0, got %d", p.BatchSize)
	case p.BatchBytes <= 0:
		return keyErrorf("pipeline.batchBytes", "must be greater than 0, got %d", p.BatchBytes)
	case p.MaxWait < 0:
		return keyErrorf("pipeline.maxWait", "must not be negative, got %v", p.MaxWait)
	case p.Buffer < 0:
		return keyErrorf("pipeline.buffer", "must not be negative, got %d", p.Buffer)
	}
	if p.DetachAfter < 0 {
		return keyErrorf("pipeline.detachAfter", "must not be negative, got %v", p.DetachAfter)
	}
	if p.Resync < 0 {
		return keyErrorf("pipeline.resync", "must not be negative (0 turns resyncs off), got %v", p.Resync)
	}
	for i, r := range c.Resources {
		if r.Resync != nil && *r.Resync < 0 {
			return keyErrorf(fmt.Sprintf("resources[%d].resync", i), "must not be negative (0 turns resyncs of this resource off), got %v", *r.Resync)
		}
	}
	return nil
}

func (c *Config) validateSinks() error {
	if len(c.Sinks) == 0 {
		return keyErrorf("sinks", "empty list")
	}
	names := map[string]int{}
	paths := map[string]int{} // a bbolt file can be opened once: one sink per state file
	for i, s := range c.Sinks {
		key := fmt.Sprintf("sinks[%d]", i)
		if strings.TrimSpace(s.Name) == "" {
			return keyErrorf(key+".name", "required")
		}
		if prev, dup := names[s.Name]; dup {
			return keyErrorf(key+".name", "duplicate sink name %q (also sinks[%d])", s.Name, prev)
		}
		names[s.Name] = i
		switch s.Type {
		case SinkPostgres, SinkKafka, SinkStdout:
		case "":
			return keyErrorf(key+".type", "required (postgres, kafka or stdout)")
		default:
			return keyErrorf(key+".type", "unknown sink type %q (want postgres, kafka or stdout)", s.Type)
		}
		for _, block := range []struct {
			name string
			set  bool
		}{{SinkPostgres, s.Postgres != nil}, {SinkKafka, s.Kafka != nil}, {SinkStdout, s.Stdout != nil}} {
			if block.set && block.name != s.Type {
				return keyErrorf(key+"."+block.name, "set on a %s sink", s.Type)
			}
		}
		if err := sinkOptions(key, &s); err != nil {
			return err
		}
		if err := validateCheckpoint(key, &s); err != nil {
			return err
		}
		if s.Type != SinkPostgres && s.Checkpoint.Type == "file" {
			if prev, dup := paths[s.Checkpoint.Path]; dup {
				return keyErrorf(key+".checkpoint.path", "%q is already the state file of sinks[%d]; give each sink its own", s.Checkpoint.Path, prev)
			}
			paths[s.Checkpoint.Path] = i
		}
	}
	return nil
}

// sinkOptions validates a sink's options block with the sink's own Validate, whose error
// reads "<key>: <reason>" under the block; a missing block is the sink's zero options.
func sinkOptions(key string, s *Sink) error {
	var err error
	switch s.Type {
	case SinkPostgres:
		key += ".postgres"
		err = deref(s.Postgres).Validate()
	case SinkKafka:
		key += ".kafka"
		err = deref(s.Kafka).Validate()
	case SinkStdout:
		key += ".stdout"
		err = stdout.Options{ResolvedInterval: deref(s.Stdout).ResolvedInterval}.Validate()
	}
	if err == nil {
		return nil
	}
	field, reason, ok := strings.Cut(err.Error(), ": ")
	if !ok {
		return keyErrorf(key, "%v", err)
	}
	return keyErrorf(key+"."+field, "%s", reason)
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func validateCheckpoint(key string, s *Sink) error {
	key += ".checkpoint"
	cp := s.Checkpoint
	if s.Type == SinkPostgres {
		if cp.Type != "" && cp.Type != "postgres" {
			return keyErrorf(key+".type", "a postgres sink keeps its checkpoints in its own database; leave it unset")
		}
		return nil
	}
	if cp.FlushInterval < 0 {
		return keyErrorf(key+".flushInterval", "must not be negative (0 writes every commit at once), got %v", cp.FlushInterval)
	}
	if cp.FlushInterval > 0 && s.Type != SinkKafka {
		// The stdout sink moves its resolved watermark as soon as Commit returns, which
		// is right only when that commit is durable.
		return keyErrorf(key+".flushInterval", "grouped commits are for kafka sinks; a %s sink writes every commit at once (0), got %v", s.Type, cp.FlushInterval)
	}
	switch cp.Type {
	case "none":
	case "file":
		if cp.Path == "" {
			return keyErrorf(key+".path", "required for a file checkpoint")
		}
	case "kafka":
		if s.Type != SinkKafka {
			return keyErrorf(key+".type", "kafka checkpoints need a kafka sink's brokers")
		}
		if cp.Topic == "" {
			return keyErrorf(key+".topic", "required for a kafka checkpoint")
		}
	default:
		return keyErrorf(key+".type", "unknown checkpoint type %q (want file, kafka or none)", cp.Type)
	}
	return nil
}

func (c *Config) validateLog() error {
	if !contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		return keyErrorf("log.level", "unknown log level %q (want debug, info, warn or error)", c.Log.Level)
	}
	if !contains([]string{"text", "json"}, c.Log.Format) {
		return keyErrorf("log.format", "unknown log format %q (want text or json)", c.Log.Format)
	}
	if c.Log.ProgressInterval <= 0 {
		return keyErrorf("log.progressInterval", "must be greater than 0, got %v", c.Log.ProgressInterval)
	}
	return nil
}

func (c *Config) validateLeaderElection() error {
	le := c.LeaderElection
	if !le.Enabled {
		return nil
	}
	// client-go's leaderelection refuses these too, but later and less clearly.
	switch {
	case le.Namespace == "":
		return keyErrorf("leaderElection.namespace", "required")
	case le.Name == "":
		return keyErrorf("leaderElection.name", "required")
	case le.Identity == "":
		return keyErrorf("leaderElection.identity", "required (the hostname is unknown)")
	case le.RetryPeriod <= 0:
		return keyErrorf("leaderElection.retryPeriod", "must be greater than 0, got %v", le.RetryPeriod)
	case float64(le.RenewDeadline) <= 1.2*float64(le.RetryPeriod):
		return keyErrorf("leaderElection.renewDeadline", "must be more than 1.2 × retryPeriod (%v), got %v", le.RetryPeriod, le.RenewDeadline)
	case le.LeaseDuration <= le.RenewDeadline:
		return keyErrorf("leaderElection.leaseDuration", "must be longer than renewDeadline (%v), got %v", le.RenewDeadline, le.LeaseDuration)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (c *Config) validateUI() error {
	u := c.UI
	if u.Address != "" {
		if err := checkAddress(u.Address); err != nil {
			return keyErrorf("ui.address", "%v", err)
		}
	}
	if u.Address == "" && u.Sink == "" {
		return nil
	}
	for _, s := range c.Sinks {
		if (u.Sink == "" || s.Name == u.Sink) && s.Type == SinkPostgres {
			return nil
		}
		if s.Name == u.Sink {
			return keyErrorf("ui.sink", "sink %s is a %s sink; the UI reads a postgres sink's schema", s.Name, s.Type)
		}
	}
	if u.Sink != "" {
		return keyErrorf("ui.sink", "no sink named %s", u.Sink)
	}
	return keyErrorf("ui.address", "the UI reads a postgres sink's schema, and no sink is of type postgres")
}
