package audit

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// BenchmarkDecode decodes a batch as the apiserver sends it at level RequestResponse: 400
// ConfigMap updates, each with its request and response object (~1.3 KB each).
func BenchmarkDecode(b *testing.B) {
	data := `{"` + strings.Repeat("k", 8) + `":"` + strings.Repeat("v", 1100) + `"}`
	obj := func(rv int) string {
		return fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-1","namespace":"bench","uid":"0b9c0c56-4a45-4a4e-9a4b-2b5b3c8d9e10","resourceVersion":"%d","creationTimestamp":"2026-11-27T05:00:00Z"},"data":%s}`, rv, data)
	}
	var events []string
	for i := range 400 {
		events = append(events, event(`"stage":"ResponseComplete","verb":"update","requestURI":"/api/v1/namespaces/bench/configmaps/cm-1",
			"user":{"username":"dev-a@example.com","uid":"token-user-1","groups":["testenv:token-users","system:authenticated"]},
			"sourceIPs":["127.0.0.1"],"userAgent":"kubectl/v1.36.5 (linux/amd64) kubernetes/abcdef",
			"objectRef":{"resource":"configmaps","namespace":"bench","name":"cm-1","uid":"0b9c0c56-4a45-4a4e-9a4b-2b5b3c8d9e10","apiVersion":"v1","resourceVersion":"`+fmt.Sprint(i)+`"},
			"responseStatus":{"metadata":{},"code":200},"requestObject":`+obj(i)+`,"responseObject":`+obj(i+1)+`,
			"annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding"}`))
	}
	body := []byte(list(events...))
	for _, d := range []struct {
		name   string
		decode func(io.Reader) ([]Event, Counts, error)
	}{{"fields only", Decode}, {"published types", decodeTyped}} {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				got, _, err := d.decode(bytes.NewReader(body))
				if err != nil || len(got) != 400 {
					b.Fatal(len(got), err)
				}
			}
		})
	}
}
