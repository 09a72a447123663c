package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// NewTransport builds the sink's own kafka-go transport with opts' TLS and SASL settings.
// Each sink (and its kafka checkpoint store) gets its own: kafka-go's DefaultTransport is
// shared by the whole process and keeps metadata and connections across broker restarts.
func NewTransport(opts Options) (*kafka.Transport, error) {
	t := &kafka.Transport{
		Dial:        (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		DialTimeout: 5 * time.Second,
		MetadataTTL: transportMetadataTTL,
		ClientID:    "kube-cdc",
	}
	if opts.TLS.Enabled {
		c, err := tlsConfig(opts.TLS)
		if err != nil {
			return nil, err
		}
		t.TLS = c
	}
	m, err := saslMechanism(opts.SASL)
	if err != nil {
		return nil, err
	}
	t.SASL = m
	return t, nil
}

// transportMetadataTTL is how often the Transport refreshes its metadata (kafka-go's
// default): how stale its routing can be after a partition's leader moves.
const transportMetadataTTL = 6 * time.Second

func tlsConfig(o TLS) (*tls.Config, error) {
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         o.ServerName,
		InsecureSkipVerify: o.InsecureSkipVerify, //nolint:gosec // an explicit, documented opt-in
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka.tls.caFile %s: no PEM certificates", o.CAFile)
		}
		c.RootCAs = pool
	}
	if o.CertFile != "" || o.KeyFile != "" {
		if o.CertFile == "" || o.KeyFile == "" {
			return nil, fmt.Errorf("kafka.tls: certFile and keyFile go together")
		}
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

func saslMechanism(o SASL) (sasl.Mechanism, error) {
	switch strings.ToUpper(o.Mechanism) {
	case "":
		return nil, nil
	case "PLAIN":
		return plain.Mechanism{Username: o.Username, Password: o.Password}, nil
	case "SCRAM-SHA-256":
		return scram.Mechanism(scram.SHA256, o.Username, o.Password)
	case "SCRAM-SHA-512":
		return scram.Mechanism(scram.SHA512, o.Username, o.Password)
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism %q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", o.Mechanism)
}

func compression(name string) (kafka.Compression, error) {
	switch strings.ToLower(name) {
	case "", "none":
		return 0, nil
	case "gzip":
		return kafka.Gzip, nil
	case "snappy":
		return kafka.Snappy, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("kafka.compression %q is not one of none, gzip, snappy, lz4, zstd", name)
}
