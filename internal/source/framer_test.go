package source

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"k8s.io/apimachinery/pkg/util/framer"
)

// frames reads every frame of r through a caller buffer of size n, as client-go's
// streaming decoder does (growing on io.ErrShortBuffer).
func frames(t *testing.T, r io.Reader, n int) ([]string, error) {
	t.Helper()
	var out []string
	buf := make([]byte, n)
	var frame []byte
	for {
		k, err := r.Read(buf)
		frame = append(frame, buf[:k]...)
		if errors.Is(err, io.ErrShortBuffer) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(frame))
		frame = frame[:0]
	}
}

// A watch stream's tricky bytes — braces and brackets inside strings, escaped quotes and
// backslashes, unicode escapes, nesting, whitespace and newlines between events or none —
// are split into exactly the frames apimachinery's encoding/json framer finds, whatever
// the caller's buffer size and however the bytes arrive.
func TestTheWatchFramerSplitsAStreamExactlyAsApimachinerysJSONFramer(t *testing.T) {
	events := []string{
		`{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}}`,
		`{"type":"MODIFIED","object":{"data":{"braces":"}{][","quote":"say \"}\" twice","slash":"C:\\","end":"\\\\"}}}`,
		`{"type":"MODIFIED","object":{"data":{"u":"\u007d\u0022 é \ud83d\ude00","nul":"a\u0000b"},"list":[[1,[2,{"x":[]}]],{}]}}`,
		`{"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (5)","code":410}}`,
		`{"type":"DELETED","object":{"data":{"big":"` + strings.Repeat("x{\\\"", 5000) + `"}}}`,
	}
	for _, sep := range []string{"\n", "", " \r\n\t "} {
		stream := strings.Join(events, sep) + sep
		want, err := frames(t, framer.NewJSONFramedReader(io.NopCloser(strings.NewReader(stream))), 1<<20)
		if !errors.Is(err, io.EOF) || len(want) != len(events) {
			t.Fatalf("apimachinery's framer: %d frames, %v", len(want), err)
		}
		for _, n := range []int{1 << 20, 1024, 7} {
			for name, r := range map[string]io.Reader{
				"whole":    strings.NewReader(stream),
				"one byte": iotest.OneByteReader(strings.NewReader(stream)),
				"half":     iotest.HalfReader(strings.NewReader(stream)),
			} {
				got, err := frames(t, jsonFramer{}.NewFrameReader(io.NopCloser(r)), n)
				if !errors.Is(err, io.EOF) {
					t.Errorf("separator %q, buffer %d, %s reads: ended with %v, want io.EOF", sep, n, name, err)
				}
				if len(got) != len(want) {
					t.Fatalf("separator %q, buffer %d, %s reads: %d frames, want %d", sep, n, name, len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("separator %q, buffer %d, %s reads: frame %d = %.120q…, want %.120q…", sep, n, name, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// A stream cut inside an event is an unexpected EOF, not a short last frame; bytes that
// cannot start a JSON object between events are an error naming them.
func TestTheWatchFramerReportsACutStreamAndBytesBetweenObjects(t *testing.T) {
	cut := `{"type":"ADDED","object":{"data":{"k":"v"}}}` + "\n" + `{"type":"MODIFIED","object":{"da`
	got, err := frames(t, jsonFramer{}.NewFrameReader(io.NopCloser(strings.NewReader(cut))), 1024)
	if len(got) != 1 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut stream: %d frames, %v; want 1 frame, then io.ErrUnexpectedEOF", len(got), err)
	}
	_, err = frames(t, jsonFramer{}.NewFrameReader(io.NopCloser(bytes.NewReader([]byte(`{"a":1} x {"b":2}`)))), 1024)
	if err == nil || !strings.Contains(err.Error(), `'x'`) {
		t.Errorf("garbage between objects: %v, want an error naming 'x'", err)
	}
}
