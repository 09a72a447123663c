package kafka

import (
	"time"

	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
)

// Defaults of Options, every one of them here; withDefaults fills them, and the config
// layer (internal/config/defaults.go) reads them.
const (
	// DefaultTopic is the default topic template.
	DefaultTopic             = "kube.{cluster}.{group}.{resource}"
	DefaultPartitions        = 6
	DefaultReplicationFactor = 1
	DefaultCompression       = "none"
	DefaultBatchTimeout      = 5 * time.Millisecond
	DefaultWriteTimeout      = 10 * time.Second
	// DefaultMaxMessageBytes is the record size limit when the brokers do not say theirs
	// (DescribeConfigs refused or unsupported): 1 MiB, just under Kafka's own default
	// message.max.bytes (1048588).
	DefaultMaxMessageBytes = 1 << 20
	// DefaultDeadLetterTopic is the default dead-letter topic template: the data topic's
	// name and ".quarantine".
	DefaultDeadLetterTopic = "{topic}.quarantine"
	// DefaultResolvedTopic is the default resolved topic template: one topic per cluster,
	// beside the data topics (kube.{cluster}.{group}.{resource} has one more part, so the
	// two never collide).
	DefaultResolvedTopic = "kube.{cluster}.resolved"
)

// Checkpoint defaults of a Kafka sink: a file store unless configured; the kafka store's
// topic.
const (
	DefaultCheckpointType = checkpoint.TypeFile
	TypeKafkaCheckpoint   = "kafka"
	DefaultOffsetsTopic   = "kube-cdc.offsets.{cluster}"
)

// Options configures the Kafka sink: the `sinks[].kafka` config keys.
type Options struct {
	// Brokers are the bootstrap brokers, host:port. Required.
	Brokers []string `koanf:"brokers"`
	// Topic is a template: {cluster}, {group} ("core" for the core group), {version},
	// {resource}. Default DefaultTopic. A fixed name works too.
	Topic string `koanf:"topic"`
	// CreateTopics creates missing topics with Partitions, ReplicationFactor and
	// cleanup.policy=compact. Default false: a missing topic is an error naming it.
	CreateTopics      bool `koanf:"createTopics"`
	Partitions        int  `koanf:"partitions"`        // default DefaultPartitions
	ReplicationFactor int  `koanf:"replicationFactor"` // default DefaultReplicationFactor
	// Compression: none | gzip | snappy | lz4 | zstd. Default DefaultCompression (none).
	Compression string `koanf:"compression"`
	// BatchTimeout has no effect: it was how long kafka-go's Writer waited to fill a batch,
	// and the sink now sends every chunk at once (produce.Producer). Kept so that configs
	// setting it still load. Default DefaultBatchTimeout.
	BatchTimeout time.Duration `koanf:"batchTimeout"`
	// WriteTimeout bounds one produce request. Default DefaultWriteTimeout.
	WriteTimeout time.Duration `koanf:"writeTimeout"`
	// MaxMessageBytes is the largest record batch the sink sends to one partition, as the
	// broker counts it (key, value, headers and framing, before compression). A change
	// whose record is larger is quarantined: a stub goes to the data topic, the record to
	// DeadLetterTopic. Default 0: what the brokers accept, read with DescribeConfigs (a
	// topic's max.message.bytes, at most the broker's message.max.bytes), else
	// DefaultMaxMessageBytes. Set it when the sink may not describe configs, or to quarantine
	// below the broker's limit; set above it, the broker's refusals quarantine instead.
	MaxMessageBytes int `koanf:"maxMessageBytes"`
	// DeadLetterTopic is a template for the topic quarantined changes go to: {topic} (the
	// data topic), {cluster}, {group}, {version}, {resource}. Default DefaultDeadLetterTopic.
	// Created like data topics (compacted) with CreateTopics; when it is missing otherwise,
	// quarantined changes are only logged.
	DeadLetterTopic string `koanf:"deadLetterTopic"`
	// ResolvedInterval is how often the sink writes resolved records (resolved.go): per
	// resource, "every record up to RV X is acknowledged", for the watermarks that moved
	// since the last ones. Default 0: none.
	ResolvedInterval time.Duration `koanf:"resolvedInterval"`
	// ResolvedTopic is a template for the topic resolved records go to: {cluster}, and
	// {topic}, {group}, {version}, {resource} for a topic per resource. Default
	// DefaultResolvedTopic, one topic for the cluster. Created like data topics (compacted)
	// with CreateTopics; when it is missing otherwise, the start fails naming it (and one
	// deleted later is warned about and tried again at every interval).
	ResolvedTopic string `koanf:"resolvedTopic"`
	TLS           TLS    `koanf:"tls"`
	SASL          SASL   `koanf:"sasl"`
}

// withDefaults fills Options' documented defaults: the one place that does, called by
// every entry point that takes Options (New, OpenCheckpoint, ReadQuarantine,
// DeadLetterTopicExists). MaxMessageBytes' default is the brokers' limit, read by New.
func (o Options) withDefaults() Options {
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.Partitions <= 0 {
		o.Partitions = DefaultPartitions
	}
	if o.ReplicationFactor <= 0 {
		o.ReplicationFactor = DefaultReplicationFactor
	}
	if o.Compression == "" {
		o.Compression = DefaultCompression
	}
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = DefaultBatchTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.DeadLetterTopic == "" {
		o.DeadLetterTopic = DefaultDeadLetterTopic
	}
	if o.ResolvedTopic == "" {
		o.ResolvedTopic = DefaultResolvedTopic
	}
	return o
}

// TLS configures the connection to the brokers.
type TLS struct {
	Enabled            bool   `koanf:"enabled"`
	CAFile             string `koanf:"caFile"`
	CertFile           string `koanf:"certFile"`
	KeyFile            string `koanf:"keyFile"`
	ServerName         string `koanf:"serverName"`
	InsecureSkipVerify bool   `koanf:"insecureSkipVerify"`
}

// SASL configures authentication: mechanism "" (none), PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
type SASL struct {
	Mechanism string `koanf:"mechanism"`
	Username  string `koanf:"username"`
	Password  string `koanf:"password"`
}
