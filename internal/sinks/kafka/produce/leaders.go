package produce

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	metadataapi "github.com/segmentio/kafka-go/protocol/metadata"
)

// leaders returns the address of the broker leading each partition of topic, from the
// Transport's metadata cache (no request: the Transport refreshes it on its own), as
// kafka-go's Client.Produce routes a request. What it read is kept for leadersFresh, or
// until a send fails: reading and copying the Transport's cache for every batch was 4% of
// the daemon's CPU at 200 changes/s.
//
// After a failed send the Transport's cache may be what is wrong: a partition's leader
// moved (a broker restarted, a reassignment) and the Transport learns it only at its next
// refresh, up to its MetadataTTL later, so every retry until then would go to the
// old leader and fail again. For that long the topic's leaders are asked of a broker
// directly (askLeaders), once per leadersFresh. So are those of a topic the cache does
// not list (created by another client since the Transport's last refresh).
func (p *Producer) leaders(ctx context.Context, topic string) (map[int]string, error) {
	p.mu.Lock()
	l, ok := p.leaderCache[topic]
	ask := time.Now().Before(p.askUntil[topic])
	p.mu.Unlock()
	if ok && time.Since(l.at) < leadersFresh {
		return l.addrs, nil
	}
	var addrs map[int]string
	var err error
	if ask {
		addrs, err = p.askLeaders(ctx, topic, l.addrs)
	}
	if !ask || err != nil {
		addrs, err = p.readLeaders(ctx, topic)
	}
	if err != nil && !ask && errors.Is(err, kafka.UnknownTopicOrPartition) {
		// The Transport's cache lacks a topic another client created since its refresh.
		if a, aerr := p.askLeaders(ctx, topic, nil); aerr == nil {
			addrs, err = a, nil
		}
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.leaderCache == nil {
		p.leaderCache = map[string]topicLeaders{}
	}
	p.leaderCache[topic] = topicLeaders{addrs: addrs, at: time.Now()}
	p.mu.Unlock()
	return addrs, nil
}

// leadersFresh is how long leaders trusts what it read: a small part of the time the
// Transport keeps its own metadata (6 s), so routing lags the Transport's little.
const leadersFresh = time.Second

// topicLeaders is what leaders read of a topic and when.
type topicLeaders struct {
	addrs map[int]string
	at    time.Time
}

// forgetLeaders makes the next send of topic read its leaders again, from a broker
// rather than the Transport's cache for its MetadataTTL (see leaders). The leaders
// read last stay, as brokers to ask.
func (p *Producer) forgetLeaders(topic string) {
	p.mu.Lock()
	if l, ok := p.leaderCache[topic]; ok {
		p.leaderCache[topic] = topicLeaders{addrs: l.addrs} // stale: at is zero
	}
	if p.askUntil == nil {
		p.askUntil = map[string]time.Time{}
	}
	p.askUntil[topic] = time.Now().Add(p.routeIn)
	p.mu.Unlock()
}

// readLeaders is leaders' read of the Transport's cache.
func (p *Producer) readLeaders(ctx context.Context, topic string) (map[int]string, error) {
	r, err := p.cfg.Transport.RoundTrip(ctx, p.addr, &metadataapi.Request{TopicNames: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("partition leaders of %s: %w", topic, err)
	}
	return leadersOf(r.(*metadataapi.Response), topic)
}

// askLeaders asks the brokers for topic's leaders over the Producer's own connections
// (askBrokers).
func (p *Producer) askLeaders(ctx context.Context, topic string, known map[int]string) (map[int]string, error) {
	var out map[int]string
	err := p.askBrokers(ctx, topic, known, func(r *metadataapi.Response) (err error) {
		out, err = leadersOf(r, topic)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("partition leaders of %s: %w", topic, err)
	}
	return out, nil
}

// Partitions asks a broker how many partitions topic has: not the Transport's cache,
// which does not list a topic another client created since its last refresh.
func (p *Producer) Partitions(ctx context.Context, topic string) (int, error) {
	n := 0
	err := p.askBrokers(ctx, topic, nil, func(r *metadataapi.Response) error {
		if len(r.Topics) != 1 {
			return kafka.UnknownTopicOrPartition
		}
		if err := brokerError(r.Topics[0].ErrorCode, ""); err != nil {
			return err
		}
		if n = len(r.Topics[0].Partitions); n == 0 {
			return kafka.LeaderNotAvailable
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	return n, nil
}

// askBrokers asks the brokers about topic over the Producer's own connections, the
// bootstrap brokers first, then those of known (the leaders read last), until one
// answers with what read accepts.
func (p *Producer) askBrokers(ctx context.Context, topic string, known map[int]string, read func(*metadataapi.Response) error) error {
	addrs := slices.Clone(p.cfg.Brokers)
	var more []string
	for _, a := range known {
		if !slices.Contains(addrs, a) && !slices.Contains(more, a) {
			more = append(more, a)
		}
	}
	slices.Sort(more) // map order is random: ask in a stable one
	addrs = append(addrs, more...)
	var errs []error
	for _, a := range addrs {
		r, err := p.conns.roundTrip(ctx, a, &metadataapi.Request{TopicNames: []string{topic}})
		if err == nil {
			if err = read(r.(*metadataapi.Response)); err == nil {
				return nil
			}
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// leadersOf reads topic's partition leaders from a metadata answer.
func leadersOf(meta *metadataapi.Response, topic string) (map[int]string, error) {
	if len(meta.Topics) != 1 {
		return nil, fmt.Errorf("partition leaders of %s: %w", topic, kafka.UnknownTopicOrPartition)
	}
	if err := brokerError(meta.Topics[0].ErrorCode, ""); err != nil {
		return nil, fmt.Errorf("partition leaders of %s: %w", topic, err)
	}
	out := make(map[int]string, len(meta.Topics[0].Partitions))
	for _, p := range meta.Topics[0].Partitions {
		for _, b := range meta.Brokers {
			if b.NodeID == p.LeaderID {
				out[int(p.PartitionIndex)] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
				break
			}
		}
	}
	return out, nil
}
