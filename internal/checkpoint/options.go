package checkpoint

import "time"

// Options selects and configures a checkpoint store: the `sinks[].checkpoint` config keys.
// PostgreSQL sinks keep their checkpoints in their own database and ignore this.
type Options struct {
	// Type: file | none, or kafka for Kafka sinks. Required here; the config layer fills
	// each sink type's default (stdout.DefaultCheckpointType, kafka.DefaultCheckpointType).
	Type string `koanf:"type"`
	// Path of the bbolt file for Type file. Default DefaultPath, in the working directory.
	Path string `koanf:"path"`
	// Topic is the compacted topic for Type kafka. Default kafka.DefaultOffsetsTopic.
	Topic string `koanf:"topic"`
	// FlushInterval groups the commits of Type file (FileOptions.FlushInterval): batches
	// committed within it are written to the file together, and a crash re-emits at most
	// that interval's records. 0: every commit is written before the sink goes on (the
	// stdout sink's setting). The config layer fills DefaultFlushInterval for Kafka sinks.
	FlushInterval time.Duration `koanf:"flushInterval"`
}
