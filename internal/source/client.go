package source

import (
	"context"
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
	// A dialer of its own gives the watch client a transport (and connections) of its own:
	// client-go shares transports only between configs with the same dialer. Its TCP
	// keep-alive finds a connection whose peer is gone (a NAT entry dropped, the
	// apiserver's host lost) after about 30 s of silence, and the failed read re-opens the
	// watch: over HTTP/2 client-go's transport pinged an idle connection after 30 s and
	// dropped it 15 s later; HTTP/1.1 has no ping, and the default probes take minutes.
	keepAlive := net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}
	w.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAliveConfig: keepAlive}).DialContext
	w.Timeout = 0
	// Watches speak HTTP/1.1: the response body is then read from the connection in the
	// stream's own goroutine (watchstream.go), where HTTP/2 reads every frame in the
	// transport's read loop goroutine and hands it over through a pipe, writing a
	// WINDOW_UPDATE back for each event read: 5–15% more CPU per change at 200 changes/s
	// (docs/benchmarks.md, "A watch reader of our own"). Each watch gets a connection of
	// its own, which a watch wants anyway (above). LISTs and discovery keep HTTP/2.
	w.TLSClientConfig.NextProtos = []string{"http/1.1"}
	w.QPS, w.Burst = -1, 0 // watches are long-lived; the rate limiter only delays reconnects
	watch, err := rest.UnversionedRESTClientFor(w)
	if err != nil {
		return nil, fmt.Errorf("watch client: %w", err)
	}
	return &Clients{list: list, watch: watch, Discovery: disc}, nil
}

// do sends req and returns the response's body, or the apiserver's error as a
// *StatusError: its reason (apierrors.IsForbidden …) and its message, which names the
// user, the verb and the resource refused. Result.Raw alone would hide both behind the
// generic "unknown" client-go makes of a JSON error body.
//
// A request in flight when ctx ends is let finish for up to probeGrace rather than cut at
// once: cut while its body is read, client-go logs "Unexpected error when reading
// response body … context canceled" at ERROR, which a clean SIGTERM right after a probe
// did (TestASIGTERMLogsNoWarningNorError, 2 of 20 shutdowns). Every caller sends a small
// probe, which takes milliseconds; a hung one still ends probeGrace after ctx.
func do(ctx context.Context, req *rest.Request) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(probeGrace, cancel) })()
	result := req.Do(rctx)
	body, err := result.Raw()
	if err != nil {
		return nil, result.Error()
	}
	return body, nil
}

// probeGrace is how long do lets a request in flight finish once its context ended.
const probeGrace = 2 * time.Second

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
