package source

import (
	"fmt"
	"net"
	"path"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// ClientOptions tunes the HTTP clients the source uses.
type ClientOptions struct {
	QPS         float32 // client-side rate limit of LIST requests; default 50
	Burst       int     // default 100
	Compression bool    // gzip responses; default off (it costs CPU on both ends)
}

// Clients are the apiserver clients of one source: one for LISTs and discovery, and one
// for watches on its own connection. A watch that shared an HTTP/2 connection with heavy
// traffic was seen closed by the apiserver within a second; on its own it never was.
type Clients struct {
	list      *rest.RESTClient
	watch     *rest.RESTClient
	Discovery discovery.DiscoveryInterface
}

// NewClients builds the source's clients from a rest.Config.
func NewClients(cfg *rest.Config, opts ClientOptions) (*Clients, error) {
	if opts.QPS == 0 {
		opts.QPS = 50
	}
	if opts.Burst == 0 {
		opts.Burst = 100
	}
	base := rest.CopyConfig(cfg)
	base.QPS, base.Burst = opts.QPS, opts.Burst
	base.DisableCompression = !opts.Compression
	base.UserAgent = "kube-cdc"

	disc, err := discovery.NewDiscoveryClientForConfig(base)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}

	raw := rest.CopyConfig(base)
	raw.NegotiatedSerializer = negotiatedSerializer()
	raw.AcceptContentTypes = "application/json"
	raw.ContentType = "application/json"
	list, err := rest.UnversionedRESTClientFor(raw)
	if err != nil {
		return nil, fmt.Errorf("list client: %w", err)
	}

	w := rest.CopyConfig(raw)
	// A dialer of its own gives the watch client a transport (and connection) of its own:
	// client-go shares transports only between configs with the same dialer.
	w.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	w.Timeout = 0
	w.QPS, w.Burst = -1, 0 // watches are long-lived; the rate limiter only delays reconnects
	watch, err := rest.UnversionedRESTClientFor(w)
	if err != nil {
		return nil, fmt.Errorf("watch client: %w", err)
	}
	return &Clients{list: list, watch: watch, Discovery: disc}, nil
}

// collectionPath is the URL path of a resource's collection, in one namespace or all.
func collectionPath(r change.Resource, namespace string) string {
	p := "/apis/" + r.Group + "/" + r.Version
	if r.Group == "" {
		p = "/api/" + r.Version
	}
	if namespace != "" {
		p += "/namespaces/" + namespace
	}
	return path.Join(p, r.Resource)
}
