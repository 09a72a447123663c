package checkpoint

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Store types this package opens. A sink's own technology may offer more (the Kafka
// sink's "kafka" store lives in internal/sinks/kafka).
const (
	TypeFile = "file"
	TypeNone = "none"
)

// DefaultPath is Options.Path's default.
const DefaultPath = "kube-cdc-state.db"

// DefaultFlushInterval is Options.FlushInterval's default for Kafka sinks
// (docs/benchmarks.md, "Kafka per-batch cost").
const DefaultFlushInterval = 100 * time.Millisecond

// Open opens the store opts selects: file or none. An empty Type is an error: each sink
// package names its default (stdout: none, kafka: file) and the config layer fills it in,
// so that an empty type never means two things.
func Open(opts Options) (Store, error) {
	switch strings.ToLower(opts.Type) {
	case TypeFile:
		path := opts.Path
		if path == "" {
			path = DefaultPath
		}
		return OpenFileWith(path, FileOptions{FlushInterval: opts.FlushInterval})
	case TypeNone:
		return None{}, nil
	case "":
		return nil, fmt.Errorf("checkpoint.type is empty (want %s or %s)", TypeFile, TypeNone)
	}
	return nil, fmt.Errorf("checkpoint.type %q is not one this sink can use (%s, %s)", opts.Type, TypeFile, TypeNone)
}

// None remembers nothing: every start is a fresh relist and snapshot (the stdout sink's
// default). It is the one "no store" value; sinks never hold a nil Store.
type None struct{}

func (None) Load(context.Context, string, change.Resource) (change.RV, error) { return 0, nil }
func (None) KeyIndex(context.Context, string, change.Resource, func(change.Key, change.Entry) error) error {
	return nil
}
func (None) Commit(context.Context, string, change.Batch) error { return nil }
func (None) Close() error                                       { return nil }
