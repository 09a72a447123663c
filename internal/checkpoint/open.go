package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Defaults of Options.
const (
	DefaultPath  = "kube-cdc-state.db"
	DefaultTopic = "kube-cdc.offsets.{cluster}"
)

// Env is what Open needs besides Options.
type Env struct {
	Cluster string
	// Kafka is required for Type kafka: the serving sink's brokers, transport and key index.
	Kafka *KafkaConfig
}

// Open opens the store opts selects: file (the default when Type is empty), kafka or none.
func Open(ctx context.Context, opts Options, env Env) (Store, error) {
	switch strings.ToLower(opts.Type) {
	case "", "file":
		path := opts.Path
		if path == "" {
			path = DefaultPath
		}
		return OpenFile(path)
	case "kafka":
		if env.Kafka == nil {
			return nil, errors.New("checkpoint.type kafka is only available to kafka sinks")
		}
		topic := opts.Topic
		if topic == "" {
			topic = DefaultTopic
		}
		topic = strings.ReplaceAll(topic, "{cluster}", env.Cluster)
		cfg := *env.Kafka
		if cfg.Cluster == "" {
			cfg.Cluster = env.Cluster
		}
		return OpenKafka(ctx, topic, cfg)
	case "none":
		return None{}, nil
	}
	return nil, fmt.Errorf("checkpoint.type %q is not one of file, kafka, none", opts.Type)
}

// None remembers nothing: every start is a fresh relist and snapshot (the stdout sink's
// default).
type None struct{}

func (None) Load(context.Context, string, change.Resource) (change.RV, error) { return 0, nil }
func (None) KeyIndex(context.Context, string, change.Resource, func(change.Key, change.Entry) error) error {
	return nil
}
func (None) Commit(context.Context, string, change.Batch) error { return nil }
func (None) Close() error                                       { return nil }
