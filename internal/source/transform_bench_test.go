package source

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/framer"
)

// A ConfigMap of about 1.3 KB as the apiserver sends it, managedFields included.
var benchObject = []byte(fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-1","namespace":"bench","uid":"0f0e8c1a-4b7e-4e43-9f39-0b8d2a3c5d6e","resourceVersion":"123456","creationTimestamp":"2026-11-22T00:00:00Z","labels":{"app":"bench","tier":"x"},"managedFields":[{"manager":"bench","operation":"Update","apiVersion":"v1","time":"2026-11-22T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:payload":{}},"f:metadata":{"f:labels":{".":{},"f:app":{},"f:tier":{}}}}}]},"data":{"payload":"%s"}}`, strings.Repeat("x", 1000)))

func BenchmarkTransformOfAConfigMap(b *testing.B) {
	tr := &Transform{RedactSecrets: true}
	b.SetBytes(int64(len(benchObject)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := tr.apply(benchObject, configMapType); err != nil {
			b.Fatal(err)
		}
	}
}

// A LIST item: the same ConfigMap without apiVersion and kind, which the transform adds.
func BenchmarkTransformOfAListedConfigMap(b *testing.B) {
	item := []byte(strings.Replace(string(benchObject), `"kind":"ConfigMap","apiVersion":"v1",`, "", 1))
	tr := &Transform{RedactSecrets: true}
	b.SetBytes(int64(len(item)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := tr.apply(item, configMapType); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeOfAWatchEvent(b *testing.B) {
	ev := []byte(`{"type":"MODIFIED","object":` + string(benchObject) + `}`)
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := (rawSerializer{}).Decode(ev, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFramingOfAWatchStream: the frames of 1,000 ConfigMap events, by apimachinery's
// encoding/json framer and by jsonFramer.
func BenchmarkFramingOfAWatchStream(b *testing.B) {
	ev := `{"type":"MODIFIED","object":` + string(benchObject) + "}\n"
	stream := []byte(strings.Repeat(ev, 1000))
	for name, newReader := range map[string]func(io.ReadCloser) io.ReadCloser{
		"apimachinery": framer.NewJSONFramedReader,
		"kube-cdc":     jsonFramer{}.NewFrameReader,
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			buf := make([]byte, 64<<10)
			for b.Loop() {
				r := newReader(io.NopCloser(bytes.NewReader(stream)))
				for {
					if _, err := r.Read(buf); err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
				}
			}
		})
	}
}
