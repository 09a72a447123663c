package source

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// jsonFramer splits a watch response into its JSON objects, as apimachinery's
// json.Framer does, without decoding them: it only tracks strings, escapes and nesting.
// apimachinery's framer runs encoding/json's scanner over every byte of every event
// (about a tenth of kube-cdc's CPU at a steady 200 events/s); the bytes are decoded once
// anyway, by rawSerializer. It assumes a well-formed stream, which the apiserver sends; a
// frame that is not JSON fails where it is decoded (the sinks store JSON only).
type jsonFramer struct{}

func (jsonFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &jsonFrameReader{r: r, br: bufio.NewReaderSize(r, 32<<10)}
}

func (jsonFramer) NewFrameWriter(w io.Writer) io.Writer { return w }

// maxFrame bounds one frame: far above any object etcd stores (1.5 MiB by default), so
// only a broken stream reaches it.
const maxFrame = 64 << 20

// jsonFrameReader returns one JSON object per Read, with apimachinery's framer contract:
// a frame longer than the caller's buffer fills it and returns io.ErrShortBuffer, and the
// next Reads return the rest.
type jsonFrameReader struct {
	r         io.ReadCloser
	br        *bufio.Reader
	frame     []byte // the frame being returned; reused once remaining is empty
	remaining []byte
}

func (f *jsonFrameReader) Read(data []byte) (int, error) {
	if len(f.remaining) == 0 {
		frame, err := f.next()
		if err != nil {
			return 0, err
		}
		f.remaining = frame
	}
	n := copy(data, f.remaining)
	f.remaining = f.remaining[n:]
	if len(f.remaining) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (f *jsonFrameReader) Close() error { return f.r.Close() }

// next reads the next top-level object or array, skipping the whitespace before it.
func (f *jsonFrameReader) next() ([]byte, error) {
	f.frame = f.frame[:0]
	depth, inString, escaped, started := 0, false, false, false
	for {
		if f.br.Buffered() == 0 {
			if _, err := f.br.Peek(1); err != nil {
				if errors.Is(err, io.EOF) && started {
					return nil, io.ErrUnexpectedEOF
				}
				return nil, err
			}
		}
		buf, _ := f.br.Peek(f.br.Buffered())
		start := 0
		for i, c := range buf {
			switch {
			case !started:
				switch c {
				case ' ', '\t', '\r', '\n':
					continue
				case '{', '[':
					started, depth, start = true, 1, i
				default:
					return nil, fmt.Errorf("watch stream: unexpected byte %q between JSON objects", c)
				}
			case inString:
				switch {
				case escaped:
					escaped = false
				case c == '\\':
					escaped = true
				case c == '"':
					inString = false
				}
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				if depth--; depth == 0 {
					f.frame = append(f.frame, buf[start:i+1]...)
					_, _ = f.br.Discard(i + 1)
					return f.frame, nil
				}
			}
		}
		if started {
			if f.frame = append(f.frame, buf[start:]...); len(f.frame) > maxFrame {
				return nil, fmt.Errorf("watch stream: a frame longer than %d bytes", maxFrame)
			}
		}
		_, _ = f.br.Discard(len(buf))
	}
}
