package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

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
// it was just found to exist by creating it, another creator won, and the brokers do not
// list its partitions yet: unknown). A missing
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
		if errors.Is(err, kafka.TopicAlreadyExists) { // another client created it meanwhile
			return listedPartitions(ctx, client, cfg.Topic)
		}
		return 0, classify(fmt.Errorf("create topic %s: %w", cfg.Topic, err))
	}
	return cfg.NumPartitions, nil
}

// listedPartitions is the number of partitions the brokers list for topic, 0 for none.
func listedPartitions(ctx context.Context, client *kafka.Client, topic string) (int, error) {
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, classify(fmt.Errorf("look up topic %s: %w", topic, err))
	}
	for _, t := range meta.Topics {
		if t.Name == topic && t.Error == nil {
			return len(t.Partitions), nil
		}
	}
	return 0, nil
}

// brokerMaxMessageBytes reads message.max.bytes, the largest record batch the brokers
// accept unless a topic says otherwise, from the first broker of meta (a broker's own
// configuration is described by that broker).
func brokerMaxMessageBytes(ctx context.Context, client *kafka.Client, meta *kafka.MetadataResponse) (int, error) {
	if len(meta.Brokers) == 0 {
		return 0, errors.New("the metadata lists no brokers")
	}
	b := meta.Brokers[0]
	return describeMaxBytes(ctx, client, kafka.DescribeConfigRequestResource{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: strconv.Itoa(b.ID), ConfigNames: []string{"message.max.bytes"},
	}, kafka.TCP(net.JoinHostPort(b.Host, strconv.Itoa(b.Port))))
}

// topicMaxMessageBytes reads topic's max.message.bytes: its own setting, else (from a real
// Kafka) the broker's default for topics.
func topicMaxMessageBytes(ctx context.Context, client *kafka.Client, topic string) (int, error) {
	return describeMaxBytes(ctx, client, kafka.DescribeConfigRequestResource{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"max.message.bytes"},
	}, nil)
}

func describeMaxBytes(ctx context.Context, client *kafka.Client, r kafka.DescribeConfigRequestResource, addr net.Addr) (int, error) {
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Addr: addr, Resources: []kafka.DescribeConfigRequestResource{r}})
	if err != nil {
		return 0, err
	}
	for _, rr := range res.Resources {
		if rr.Error != nil {
			return 0, fmt.Errorf("describe %s: %w", rr.ResourceName, rr.Error)
		}
		for _, e := range rr.ConfigEntries {
			if e.ConfigName != r.ConfigNames[0] {
				continue
			}
			n, err := strconv.Atoi(e.ConfigValue)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("%s of %s is %q", e.ConfigName, r.ResourceName, e.ConfigValue)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s of %s: not in the answer", r.ConfigNames[0], r.ResourceName)
}
