package kafka

import (
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"strings"
)

var (
	compressions   = []string{"none", "gzip", "snappy", "lz4", "zstd"}
	saslMechanisms = []string{"", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
	topicVar       = regexp.MustCompile(`\{[^}]*\}`)
	topicVars      = []string{"{cluster}", "{group}", "{version}", "{resource}"}
	// deadLetterVars adds the data topic's name to topicVars.
	deadLetterVars = append([]string{"{topic}"}, topicVars...)
)

// minMaxMessageBytes is the smallest maxMessageBytes: room for a quarantine stub and a
// dead-letter record's headers.
const minMaxMessageBytes = 4096

// Validate checks the options as the config layer leaves them (defaults filled). Its
// error reads "<key>: <reason>", the key under sinks[].kafka ("brokers[0]",
// "sasl.mechanism"), so that the config layer can name the whole key.
func (o Options) Validate() error {
	if len(o.Brokers) == 0 {
		return errors.New("brokers: required: at least one host:port")
	}
	for i, b := range o.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return fmt.Errorf("brokers[%d]: want host:port, got %q", i, b)
		}
	}
	if o.Topic == "" {
		return errors.New("topic: required")
	}
	for _, t := range []struct {
		key, template string
		vars          []string
	}{{"topic", o.Topic, topicVars}, {"deadLetterTopic", o.DeadLetterTopic, deadLetterVars}, {"resolvedTopic", o.ResolvedTopic, deadLetterVars}} {
		for _, v := range topicVar.FindAllString(t.template, -1) {
			if !slices.Contains(t.vars, v) {
				return fmt.Errorf("%s: unknown placeholder %s (want %s)", t.key, v, strings.Join(t.vars, ", "))
			}
		}
	}
	switch {
	case o.DeadLetterTopic == "":
		return errors.New("deadLetterTopic: required")
	case o.DeadLetterTopic == "{topic}" || o.DeadLetterTopic == o.Topic:
		return errors.New("deadLetterTopic: must not be the data topic")
	case o.ResolvedInterval < 0:
		return fmt.Errorf("resolvedInterval: must not be negative (0 writes no resolved records), got %v", o.ResolvedInterval)
	case o.ResolvedTopic == "":
		return errors.New("resolvedTopic: required")
	case o.ResolvedTopic == "{topic}" || o.ResolvedTopic == o.Topic:
		return errors.New("resolvedTopic: must not be the data topic")
	case o.ResolvedTopic == o.DeadLetterTopic:
		return errors.New("resolvedTopic: must not be the dead-letter topic")
	case o.MaxMessageBytes != 0 && (o.MaxMessageBytes < minMaxMessageBytes || o.MaxMessageBytes > math.MaxInt32):
		return fmt.Errorf("maxMessageBytes: want 0 (what the brokers accept) or %d to %d bytes, got %d", minMaxMessageBytes, math.MaxInt32, o.MaxMessageBytes)
	case o.Partitions <= 0:
		return fmt.Errorf("partitions: must be greater than 0, got %d", o.Partitions)
	case o.ReplicationFactor <= 0:
		return fmt.Errorf("replicationFactor: must be greater than 0, got %d", o.ReplicationFactor)
	case !slices.Contains(compressions, o.Compression):
		return fmt.Errorf("compression: unknown compression %q (want %s)", o.Compression, strings.Join(compressions, ", "))
	case o.BatchTimeout < 0:
		return fmt.Errorf("batchTimeout: must not be negative, got %v", o.BatchTimeout)
	case o.WriteTimeout <= 0:
		return fmt.Errorf("writeTimeout: must be greater than 0, got %v", o.WriteTimeout)
	case !slices.Contains(saslMechanisms, o.SASL.Mechanism):
		return fmt.Errorf("sasl.mechanism: unknown mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", o.SASL.Mechanism)
	case o.SASL.Mechanism != "" && o.SASL.Username == "":
		return fmt.Errorf("sasl.username: required with mechanism %s", o.SASL.Mechanism)
	case (o.TLS.CertFile == "") != (o.TLS.KeyFile == ""):
		return errors.New("tls: certFile and keyFile go together")
	}
	return nil
}
