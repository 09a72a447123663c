package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWithNoConfigRunStreamsTheDefaultResourcesToStdoutAsJSONLines(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "o")
	// No -c: the current kubeconfig context (KUBECONFIG, set by start), the default
	// resources and the stdout sink.
	d := start(t, "run", "--metrics-address", "")
	// Every resource synced, configmaps included: a ConfigMap created and deleted before
	// the configmaps LIST is in no LIST and in no watch (make test saw it under load, the
	// LIST's RV just past the delete), and stdout keeps no key index to infer its delete.
	eventually(t, 60*time.Second, func() error {
		if !strings.Contains(d.out.String(), `"name":"`+ns+`"`) {
			return fmt.Errorf("the namespace %s has not appeared on stdout yet", ns)
		}
		if !strings.Contains(d.log(), "all resources synced") {
			return fmt.Errorf("kube-cdc has not synced every resource yet")
		}
		return nil
	})
	c, err := kube.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "hello", map[string]string{"a": "b"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Clientset().CoreV1().ConfigMaps(ns).Delete(ctx, "hello", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	type line struct {
		Op     string          `json:"op"`
		After  json.RawMessage `json:"after"`
		Before json.RawMessage `json:"before"`
		Source struct {
			Resource, Namespace, Name, UID, ResourceVersion string
		} `json:"source"`
	}
	var ops []string
	eventually(t, 30*time.Second, func() error {
		ops = ops[:0]
		for _, l := range strings.Split(strings.TrimSpace(d.out.String()), "\n") {
			var ev line
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				return fmt.Errorf("stdout line is not JSON: %q: %v", l, err)
			}
			if ev.Source.Resource == "configmaps" && ev.Source.Namespace == ns && ev.Source.Name == "hello" {
				if ev.Source.UID != string(c.UID) {
					return fmt.Errorf("uid %s, want %s", ev.Source.UID, c.UID)
				}
				ops = append(ops, ev.Op)
			}
		}
		if strings.Join(ops, ",") != "c,d" {
			return fmt.Errorf("ops of %s/hello = %v, want [c d]", ns, ops)
		}
		return nil
	})
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
