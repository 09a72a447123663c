package source

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// Watch event types, as the apiserver writes them.
const (
	eventAdded    = "ADDED"
	eventModified = "MODIFIED"
	eventDeleted  = "DELETED"
	eventBookmark = "BOOKMARK"
	eventError    = "ERROR"
)

// watchEvent is one event of a watch response, its object still the apiserver's JSON.
type watchEvent struct {
	typ    string // one of the event… constants (or whatever else the server wrote)
	object []byte // the event's object: the caller's to keep
}

// watchStream reads one watch response in the caller's goroutine: the body is framed
// (jsonFramer) and each envelope read with gjson, with no goroutine and no channel
// between the socket and the caller. client-go's Watch puts two goroutines there (a
// StreamWatcher decoding into a channel, and the RetryWatcher passing events on through
// another), and each event woke both: at a steady 200 changes/s the wake-ups cost more
// CPU than the decoding.
type watchStream struct {
	body   io.ReadCloser
	frames *jsonFrameReader
}

// openWatch sends req, a watch request, and returns its response to read. A non-2xx
// answer is the error client-go's Watch would return: a *StatusError built from the
// server's Status (apierrors.IsGone, notServed and classify work on it).
func openWatch(ctx context.Context, req *rest.Request) (*watchStream, error) {
	body, err := req.Stream(ctx)
	if err != nil {
		return nil, err
	}
	return &watchStream{body: body, frames: jsonFramer{}.NewFrameReader(body).(*jsonFrameReader)}, nil
}

// next returns the next event. io.EOF: the server ended the watch cleanly (its
// timeoutSeconds); any other error ends the watch too (a cut stream is
// io.ErrUnexpectedEOF, a cancelled ctx the transport's error).
func (w *watchStream) next() (watchEvent, error) {
	frame, err := w.frames.next()
	if err != nil {
		return watchEvent{}, err
	}
	// GetManyBytes copies what it returns: the frame's buffer is reused by the next call.
	r := gjson.GetManyBytes(frame, "type", "object")
	if !r[1].IsObject() {
		return watchEvent{}, fmt.Errorf("watch stream: an event without an object: %.200s", frame)
	}
	return watchEvent{typ: r[0].Str, object: []byte(r[1].Raw)}, nil
}

// Close ends the watch: the transport drops the stream (HTTP/2) or the connection
// (HTTP/1.1, whose unread body cannot be reused).
func (w *watchStream) Close() error { return w.body.Close() }

// cleanEnd reports whether err, which ended a watch response, is the server ending it or
// the connection going away, on which client-go's StreamWatcher closed the watch quietly
// and the RetryWatcher re-opened it at once: EOF, a stream cut inside an event, a
// connection reset or timed out. Anything else (bytes that are no JSON, a frame over
// maxFrame) is a failure, re-opened after a backoff.
func cleanEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err)
}

// statusError is the error an ERROR event carries: its object is a metav1.Status (the
// apiserver sends nothing else there), or an internal error saying what came instead.
func statusError(object []byte) error {
	var st metav1.Status
	if err := jsonUnmarshal(object, &st); err != nil || st.Kind != "Status" {
		return apierrors.NewInternalError(fmt.Errorf("watch stream: an ERROR event whose object is no Status: %.200s", object))
	}
	return apierrors.FromObject(&st)
}
