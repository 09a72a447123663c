package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"

	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// terminalErrors are the broker answers that retrying cannot fix: rejected credentials,
// missing authorization, records the broker will never take. This is the Kafka sink's
// one classification; the offsets store and topic creation use it too.
var terminalErrors = []kafka.Error{
	kafka.SASLAuthenticationFailed,
	kafka.UnsupportedSASLMechanism,
	kafka.IllegalSASLState,
	kafka.TopicAuthorizationFailed,
	kafka.ClusterAuthorizationFailed,
	kafka.GroupAuthorizationFailed,
	kafka.MessageSizeTooLarge,
	kafka.RecordListTooLarge,
	kafka.InvalidRecord,
	kafka.PolicyViolation,
}

// isTerminal reports whether err carries one of terminalErrors.
func isTerminal(err error) bool {
	for _, e := range terminalErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// classify marks err terminal when isTerminal says so, else leaves it retryable.
func classify(err error) error {
	if isTerminal(err) {
		return retry.Terminal(err)
	}
	return err
}

// ensureTopic checks that cfg.Topic exists and returns its number of partitions (0 when
// it was just found to exist by creating it and another creator won: unknown). A missing
// topic is created with cfg when create is set; otherwise it is a terminal error naming
// the topic.
func ensureTopic(ctx context.Context, client *kafka.Client, cfg kafka.TopicConfig, create bool) (int, error) {
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{cfg.Topic}})
	if err != nil {
		return 0, classify(fmt.Errorf("look up topic %s: %w", cfg.Topic, err))
	}
	for _, t := range meta.Topics {
		if t.Name != cfg.Topic {
			continue
		}
		switch {
		case t.Error == nil && len(t.Partitions) > 0:
			return len(t.Partitions), nil
		case t.Error != nil && !errors.Is(t.Error, kafka.UnknownTopicOrPartition):
			return 0, classify(fmt.Errorf("topic %s: %w", cfg.Topic, t.Error))
		}
	}
	if !create {
		return 0, retry.Terminal(fmt.Errorf("topic %s does not exist (create it, or set createTopics: true)", cfg.Topic))
	}
	res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{cfg}})
	if err != nil {
		return 0, classify(fmt.Errorf("create topic %s: %w", cfg.Topic, err))
	}
	if err := res.Errors[cfg.Topic]; err != nil {
		if errors.Is(err, kafka.TopicAlreadyExists) {
			return 0, nil
		}
		return 0, classify(fmt.Errorf("create topic %s: %w", cfg.Topic, err))
	}
	return cfg.NumPartitions, nil
}
