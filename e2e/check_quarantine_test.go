package e2e

import (
	"context"
	"regexp"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// `kube-cdc check` names what run relies on for time travel and quarantine: the cluster's
// identity (the kube-system namespace's uid) and, for a Kafka sink, each resource's
// dead-letter topic — there, created on the first quarantined change, or missing with
// createTopics off (a warning: the change would be in the log only).
func TestCheckReportsTheClusterIdentityAndEachKafkaDeadLetterTopic(t *testing.T) {
	t.Parallel() // its own broker and namespace
	ns := namespace(t, "chkq")
	k := testenv.NewKafka(t)
	system, err := kube.Clientset().CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dlq := kafkaTopic + ".quarantine"
	for _, c := range []struct {
		name     string
		noCreate bool
		topic    bool // create the dead-letter topic first
		want     string
	}{
		{"missing without createTopics", true, false, `dead-letter stream configmaps\s+warn\s+topic ` + regexp.QuoteMeta(dlq) + ` does not exist and createTopics is false`},
		{"missing with createTopics", false, false, `dead-letter stream configmaps\s+ok\s+topic ` + regexp.QuoteMeta(dlq) + ` is created on the first quarantined change`},
		{"there", true, true, `dead-letter stream configmaps\s+ok\s+topic ` + regexp.QuoteMeta(dlq) + `\n`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.topic {
				if err := k.CreateTopic(context.Background(), dlq, 1, true); err != nil {
					t.Fatal(err)
				}
			}
			cfg := kafkaCfg{brokers: k.Addr(), ns: ns, checkpoint: "{type: kafka}", noCreate: c.noCreate}.write(t)
			code, out := runCLI(t, "check", "-c", cfg)
			if code != 0 {
				t.Errorf("check: exit %d, want 0 (a missing dead-letter topic is a warning):\n%s", code, out)
			}
			if !regexp.MustCompile(`cluster identity\s+ok\s+kube-system uid ` + string(system.UID)).MatchString(out) {
				t.Errorf("check does not name the cluster identity %s:\n%s", system.UID, out)
			}
			if !regexp.MustCompile(c.want).MatchString(out) {
				t.Errorf("check's dead-letter row, want %q:\n%s", c.want, out)
			}
		})
	}
}
