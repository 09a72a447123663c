package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/resolved"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// ResolvedTopicName expands the resolved topic template for one resource: {topic} is its
// data topic (TopicName of dataTemplate), the other placeholders are TopicName's.
func ResolvedTopicName(template, dataTemplate, cluster string, res change.Resource) string {
	if template == "" {
		template = DefaultResolvedTopic
	}
	return TopicName(strings.ReplaceAll(template, "{topic}", TopicName(dataTemplate, cluster, res)), cluster, res)
}

// Resolved records (docs/contract.md, "Resolved watermarks"), CockroachDB's resolved
// timestamps in resource versions: with ResolvedInterval set, the sink writes, for each
// resource (scope) whose watermark moved since the last interval, a record saying that
// every record of that resource up to resolvedRV (in epoch) is acknowledged by the
// brokers. The watermark is a batch's checkpoint, taken only after Prepare's write had
// every record of the batch acknowledged and the checkpoint committed; batches are
// written one after another per resource, so every earlier record was acknowledged
// before it too. Bookmarks move the checkpoint of a quiet resource, and so its records.
//
// Key: resolved.Watermark.Key ("cluster/sink/resource[/scope]"), so a compacted topic
// keeps the newest of each. Value: resolved.Append's JSON. Headers: kube-cdc.op
// "resolved", kube-cdc.rv, kube-cdc.resource and, above epoch 0, kube-cdc.epoch. The
// record time is when the watermark was committed.
func (s *Sink) startResolved() {
	if s.opts.ResolvedInterval <= 0 {
		return
	}
	s.resolved = &resolved.Emitter{Cluster: s.cluster, Sink: s.name, Interval: s.opts.ResolvedInterval,
		Emit: s.writeResolved, Log: s.log}
	stop := s.resolved.Start()
	s.stopResolved = func() {
		fctx, cancel := context.WithTimeout(context.Background(), s.opts.WriteTimeout)
		defer cancel()
		if err := stop(fctx); err != nil {
			s.log.Warn("cannot write the last resolved watermarks", "error", err)
		}
	}
}

// writeResolved writes ws as resolved records and returns once the brokers acknowledged
// all of them: per resolved topic (one by default), in the order of ws, through produce
// like data records.
func (s *Sink) writeResolved(ctx context.Context, ws []resolved.Watermark) error {
	var topics []string
	byTopic := map[string][]kafka.Message{}
	infos := map[string]topicInfo{}
	for _, w := range ws {
		topic := ResolvedTopicName(s.opts.ResolvedTopic, s.opts.Topic, s.cluster, w.Resource)
		if _, ok := infos[topic]; !ok {
			t, err := s.ensureTopic(ctx, topic)
			if err != nil {
				return err
			}
			infos[topic] = t
			topics = append(topics, topic)
		}
		byTopic[topic] = append(byTopic[topic], resolvedMessage(topic, w))
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.WriteTimeout)
	defer cancel()
	for _, topic := range topics {
		if _, err := s.produce(ctx, topic, infos[topic], byTopic[topic], refuseResolved); err != nil {
			return classify(fmt.Errorf("kafka sink %s: write %d resolved records: %w", s.name, len(ws), err))
		}
	}
	return nil
}

// refuseResolved is produce's answer to a resolved record refused as too large: a
// resolved record is a key, an RV and a few headers, so the topic's limit is broken.
func refuseResolved(_ *kafka.Message, reason string) error {
	return retry.Terminal(errors.New(reason))
}

func resolvedMessage(topic string, w resolved.Watermark) kafka.Message {
	headers := []kafka.Header{
		{Key: HeaderOp, Value: []byte(resolved.Op)},
		{Key: HeaderRV, Value: []byte(w.RV.String())},
		{Key: HeaderResource, Value: []byte(w.Resource.ID())},
	}
	if w.Epoch > 0 {
		headers = append(headers, kafka.Header{Key: HeaderEpoch, Value: []byte(strconv.Itoa(w.Epoch))})
	}
	return kafka.Message{Topic: topic, Key: []byte(w.Key()), Value: resolved.Append(nil, w), Headers: headers, Time: w.Time}
}
