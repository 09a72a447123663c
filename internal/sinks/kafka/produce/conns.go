package produce

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/saslauthenticate"
	"github.com/segmentio/kafka-go/protocol/saslhandshake"
	"github.com/segmentio/kafka-go/sasl"
)

// leaderConns are the Producer's own connections to the brokers that lead its partitions, for
// Send's produce requests: a request is written and its answer read in the goroutine of
// the write, one request at a time on a connection.
//
// Why not kafka-go's Transport, which Client.Produce goes through: it hands every request
// to the connection's goroutine and the answer back over a channel, arms the request's
// deadline on the socket and clears it, and re-arms an idle timer after each. A steady
// stream's batch is one change, so those are per change: the two goroutine wake-ups each
// woke an idle thread (futex), the daemon's largest cost at 200 changes/s. Here the
// socket's deadline moves only when it leaves the span of one to one and a half write
// timeouts from now (a steady stream moves it once every half write timeout), and an idle connection is
// dropped when next taken, not by a timer.
//
// Routing (which broker leads a partition) comes from the Transport's metadata cache,
// which it refreshes on its own, except for a while after a failed send, when it is asked
// of a broker over these connections (Producer.leaders).
type leaderConns struct {
	dial     func(ctx context.Context, network, address string) (net.Conn, error)
	tls      *tls.Config // nil: plain TCP
	sasl     sasl.Mechanism
	clientID string
	timeout  time.Duration // a request's write timeout (Config.WriteTimeout)

	mu     sync.Mutex
	idle   map[string][]*leaderConn // by broker address, most recently used last
	closed bool
}

// leaderConnIdle is how long a connection may sit unused before it is closed rather than
// used again: kafka-go's Transport default, well under the broker's own
// connections.max.idle.ms (10 minutes), so a connection is never taken just as the
// broker drops it.
const leaderConnIdle = 30 * time.Second

// dialTimeout bounds connecting to a broker, its TLS handshake, API version exchange and
// SASL authentication (NewTransport's DialTimeout).
const dialTimeout = 5 * time.Second

type leaderConn struct {
	addr     string
	pc       *protocol.Conn
	deadline time.Time // set on pc
	used     time.Time // when it last went back idle
}

// errConnsClosed is the error of a round trip after Close.
var errConnsClosed = errors.New("kafka producer closed")

func newLeaderConns(tr *kafka.Transport, timeout time.Duration) *leaderConns {
	dial := tr.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: dialTimeout}).DialContext
	}
	return &leaderConns{dial: dial, tls: tr.TLS, sasl: tr.SASL, clientID: tr.ClientID, timeout: timeout, idle: map[string][]*leaderConn{}}
}

// roundTrip sends req to the broker at addr and returns its answer. A connection that
// failed in any way is closed: its stream may be mid-answer.
func (l *leaderConns) roundTrip(ctx context.Context, addr string, req protocol.Message) (protocol.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := l.take(ctx, addr)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	deadline := c.deadline
	if left := deadline.Sub(now); left < l.timeout || left > l.timeout+l.timeout/2 {
		deadline = now.Add(l.timeout + l.timeout/2)
	}
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if !deadline.Equal(c.deadline) {
		if err := c.pc.SetDeadline(deadline); err != nil {
			c.pc.Close()
			return nil, err
		}
		c.deadline = deadline
	}
	// A cancelled write must not wait for the broker: the deadline in the past ends the
	// blocked read. Registering costs no timer.
	stop := context.AfterFunc(ctx, func() { _ = c.pc.SetDeadline(time.Unix(1, 0)) })
	res, err := c.pc.RoundTrip(req)
	if !stop() { // cancelled meanwhile: the connection's deadline is gone
		c.pc.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	if err != nil {
		c.pc.Close()
		return nil, err
	}
	l.release(c)
	return res, nil
}

// take returns an idle connection to addr, else a new one.
func (l *leaderConns) take(ctx context.Context, addr string) (*leaderConn, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errConnsClosed
	}
	var stale []*leaderConn
	var c *leaderConn
	for cs := l.idle[addr]; len(cs) > 0; cs = l.idle[addr] {
		c = cs[len(cs)-1]
		l.idle[addr] = cs[:len(cs)-1]
		if time.Since(c.used) < leaderConnIdle {
			break
		}
		stale = append(stale, c)
		c = nil
	}
	l.mu.Unlock()
	for _, s := range stale {
		s.pc.Close()
	}
	if c != nil {
		return c, nil
	}
	return l.connect(ctx, addr)
}

func (l *leaderConns) release(c *leaderConn) {
	c.used = time.Now()
	l.mu.Lock()
	if !l.closed {
		l.idle[c.addr] = append(l.idle[c.addr], c)
		c = nil
	}
	l.mu.Unlock()
	if c != nil {
		c.pc.Close()
	}
}

// connect dials addr and readies the connection as kafka-go's Transport does: TLS, the
// API versions both sides support, then SASL.
func (l *leaderConns) connect(ctx context.Context, addr string) (*leaderConn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	nc, err := l.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to broker %s: %w", addr, err)
	}
	if l.tls != nil {
		cfg := l.tls
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		nc = tls.Client(nc, cfg)
	}
	pc := protocol.NewConn(nc, l.clientID)
	deadline, _ := ctx.Deadline()
	if err := l.handshake(ctx, pc, addr, deadline); err != nil {
		pc.Close()
		return nil, fmt.Errorf("connect to broker %s: %w", addr, err)
	}
	return &leaderConn{addr: addr, pc: pc, deadline: deadline}, nil
}

func (l *leaderConns) handshake(ctx context.Context, pc *protocol.Conn, addr string, deadline time.Time) error {
	if err := pc.SetDeadline(deadline); err != nil {
		return err
	}
	r, err := pc.RoundTrip(new(apiversions.Request))
	if err != nil {
		return err
	}
	res := r.(*apiversions.Response)
	if res.ErrorCode != 0 {
		return fmt.Errorf("negotiating API versions: %w", kafka.Error(res.ErrorCode))
	}
	versions := make(map[protocol.ApiKey]int16, len(res.ApiKeys))
	for _, k := range res.ApiKeys {
		key := protocol.ApiKey(k.ApiKey)
		versions[key] = key.SelectVersion(k.MinVersion, k.MaxVersion)
	}
	pc.SetVersions(versions)
	if l.sasl == nil {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	var portNum int
	if _, err := fmt.Sscan(port, &portNum); err != nil {
		return fmt.Errorf("broker address %s: %w", addr, err)
	}
	return authenticate(sasl.WithMetadata(ctx, &sasl.Metadata{Host: host, Port: portNum}), pc, l.sasl)
}

// authenticate runs the SASL exchange of mechanism on pc, as kafka-go's Transport does.
func authenticate(ctx context.Context, pc *protocol.Conn, mechanism sasl.Mechanism) error {
	r, err := pc.RoundTrip(&saslhandshake.Request{Mechanism: mechanism.Name()})
	if err != nil {
		return err
	}
	if code := r.(*saslhandshake.Response).ErrorCode; code != 0 {
		return kafka.Error(code)
	}
	sess, state, err := mechanism.Start(ctx)
	if err != nil {
		return err
	}
	for done := false; !done; {
		r, err := pc.RoundTrip(&saslauthenticate.Request{AuthBytes: state})
		if err != nil {
			if errors.Is(err, io.EOF) {
				// A broker may answer a failed exchange by closing the connection.
				return kafka.SASLAuthenticationFailed
			}
			return err
		}
		res := r.(*saslauthenticate.Response)
		if res.ErrorCode != 0 {
			return brokerError(res.ErrorCode, res.ErrorMessage)
		}
		if done, state, err = sess.Next(ctx, res.AuthBytes); err != nil {
			return err
		}
	}
	return nil
}

// brokerError is a broker's error code and message as kafka-go's Client reports them.
func brokerError(code int16, message string) error {
	if code == 0 {
		return nil
	}
	if message == "" {
		return kafka.Error(code)
	}
	return fmt.Errorf("%w: %s", kafka.Error(code), message)
}

// close closes the idle connections; those in use close when their round trip ends.
func (l *leaderConns) close() {
	l.mu.Lock()
	idle := l.idle
	l.idle, l.closed = nil, true
	l.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.pc.Close()
		}
	}
}
