package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-cdc/kube-cdc/internal/health"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// Kubernetes Events from a real apiserver: an event repeated (its count going up, as
// the kubelet's recorder patches it) keeps one events row with the newest count; the
// apiserver's delete (what its --event-ttl does, through the same watch DELETE) keeps
// the row, marked deleted; no event ever lands in objects or changes.
func TestEventsFromTheApiserverKeepOneRowWithTheNewestCountAndOutliveTheirDelete(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dsn := pg.NewDatabase(t)
	ns := namespace(t, "ev")
	cs := kubeFor(t).Clientset()
	cfg := pgConfig(t, dsn, fmt.Sprintf("  - {name: events, namespaces: [%s]}\n  - {name: configmaps, namespaces: [%[1]s]}", ns), "")
	d := start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	waitAuditSynced(t, conn, 2) // both streams synced
	first := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	ev, err := cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.backoff"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web", UID: "uid-web", APIVersion: "v1"},
		Reason:         "BackOff", Message: "Back-off restarting failed container app", Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: "kubelet", Host: "n1"}, Count: 1, FirstTimestamp: first, LastTimestamp: first,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for n := 2; n <= 5; n++ {
		patch := fmt.Sprintf(`{"count":%d,"lastTimestamp":%q}`, n, time.Now().UTC().Format(time.RFC3339))
		if ev, err = cs.CoreV1().Events(ns).Patch(ctx, ev.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	row := func() (count int, reason, kind, rv string, deleted bool, err error) {
		err = conn.QueryRow(ctx, `SELECT count, reason, involved_kind, resource_version::text, deleted_at IS NOT NULL
			FROM kube_cdc.events WHERE namespace = $1 AND name = 'web.backoff'`, ns).Scan(&count, &reason, &kind, &rv, &deleted)
		return
	}
	eventually(t, 60*time.Second, func() error {
		c, reason, kind, rv, deleted, err := row()
		if err == nil && (c != 5 || reason != "BackOff" || kind != "Pod" || rv != ev.ResourceVersion || deleted) {
			err = fmt.Errorf("row: count %d, reason %q, kind %q, rv %s, deleted %v; want 5, BackOff, Pod, %s, live", c, reason, kind, rv, deleted, ev.ResourceVersion)
		}
		return err
	})
	if err := cs.CoreV1().Events(ns).Delete(ctx, ev.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A ConfigMap written after the delete: once it is stored, so is the delete before it
	// (one daemon, one database; the events stream is at least as far along by then).
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "after", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() error {
		c, _, _, _, deleted, err := row()
		if err == nil && (!deleted || c != 5) {
			err = fmt.Errorf("after the apiserver's delete: count %d, deleted %v; want the row kept, count 5, marked deleted", c, deleted)
		}
		return err
	})
	if n := count(t, conn, `SELECT (SELECT count(*) FROM kube_cdc.changes WHERE resource = 'events')
			+ (SELECT count(*) FROM kube_cdc.objects WHERE resource = 'events')`); n != 0 {
		t.Errorf("%d objects and changes rows of events, want none", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.events`); n != 1 {
		t.Errorf("%d events rows, want 1", n)
	}

	// An event deleted while kube-cdc is down (its TTL passing during an outage), found
	// by a relist (the events checkpoint is dropped, so the restart lists rather than
	// resuming its watch): the reconcile diff against the events table's live rows infers
	// the delete, and the row stays, marked deleted.
	if _, err := cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.pulled"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web", APIVersion: "v1"},
		Reason:         "Pulled", Message: "Container image pulled", Type: corev1.EventTypeNormal, Count: 2}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() error {
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.events WHERE name = 'web.pulled' AND deleted_at IS NULL`); n != 1 {
			return fmt.Errorf("%d live rows of web.pulled, want 1", n)
		}
		return nil
	})
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("kube-cdc exited %d on SIGTERM\n%s", code, d.log())
	}
	if err := cs.CoreV1().Events(ns).Delete(ctx, "web.pulled", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM kube_cdc.checkpoints WHERE resource = 'events'`); err != nil {
		t.Fatal(err)
	}
	d = start(t, "run", "-c", cfg)
	eventually(t, 60*time.Second, func() error {
		var deleted bool
		var n int
		err := conn.QueryRow(ctx, `SELECT deleted_at IS NOT NULL, count FROM kube_cdc.events WHERE name = 'web.pulled'`).Scan(&deleted, &n)
		if err == nil && (!deleted || n != 2) {
			err = fmt.Errorf("web.pulled after the restart: deleted %v, count %d; want kept, count 2, marked deleted", deleted, n)
		}
		return err
	})
	if n := count(t, conn, `SELECT (SELECT count(*) FROM kube_cdc.changes WHERE resource = 'events')
			+ (SELECT count(*) FROM kube_cdc.objects WHERE resource = 'events')`); n != 0 {
		t.Errorf("after the restart, %d objects and changes rows of events, want none", n)
	}
}

// why() against real servers: a pod that broke after its ConfigMap was edited by a
// named user (through the apiserver's audit webhook) lists that edit with that user.
func TestWhyNamesTheConfigMapEditAndItsUserBeforeThePodBroke(t *testing.T) {
	t.Parallel() // on a control plane of its own; see main_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	k, addr, certs := auditedPlane(t, 0)
	dsn := pg.NewDatabase(t)
	ns := namespace(t, "why")
	resources := fmt.Sprintf("  - {name: configmaps, namespaces: [%[1]s]}\n  - {name: pods, namespaces: [%[1]s]}\n"+
		"  - {name: services, namespaces: [%[1]s]}", ns)
	cfg := pgConfig(t, dsn, resources, auditConfig(t, addr, certs))
	d := start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	waitAuditSynced(t, conn, 3)
	admin := k.Clientset()
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "web-config", map[string]string{"mode": "fast"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// dev-a edits the ConfigMap; then the pod crash-loops (its status, as a kubelet writes it).
	user := testenv.TokenUsers[0]
	if _, err := userClient(t, k, user, nil).CoreV1().ConfigMaps(ns).Patch(ctx, "web-config", types.MergePatchType,
		[]byte(`{"data":{"mode":"broken"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 3,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}
	if _, err := admin.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, func() error {
		rows, err := conn.Query(ctx, `SELECT relation, name, op, coalesce(username, ''), coalesce(match, '')
			FROM kube_cdc.why('pods', $1, 'web')`, ns)
		if err != nil {
			return err
		}
		defer rows.Close()
		var got []string
		found := false
		for rows.Next() {
			var rel, name, op, who, match string
			if err := rows.Scan(&rel, &name, &op, &who, &match); err != nil {
				return err
			}
			line := fmt.Sprintf("%s %s %s by %q (%s)", rel, name, op, who, match)
			got = append(got, line)
			found = found || line == fmt.Sprintf("configmap web-config update by %q (exact)", user)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if !found || !strings.Contains(strings.Join(got, "\n"), "self web update") || !strings.Contains(strings.Join(got, "\n"), "service web create") {
			return fmt.Errorf("why(pods, %s, web):\n  %s\nwant the ConfigMap's update by %s (exact), the pod's update and the Service\n%s",
				ns, strings.Join(got, "\n  "), user, d.log())
		}
		return nil
	})
	// kube-cdc why prints the same query's rows: the ConfigMap's edit and who made it.
	code, out := runCLI(t, "why", "pods", "web", "-n", ns, "-c", cfg)
	if code != 0 {
		t.Fatalf("kube-cdc why exited %d:\n%s", code, out)
	}
	edit := regexp.MustCompile(`(?m)^\S+ \S+\s+configmap\s+configmaps ` + ns + `/web-config\s+update\s+\d+\s+` + regexp.QuoteMeta(user) + ` \(kubectl/`)
	if !edit.MatchString(out) || !strings.Contains(out, "services "+ns+"/web") {
		t.Errorf("kube-cdc why pods web -n %s: want a line naming the ConfigMap's update by %s and the Service:\n%s", ns, user, out)
	}
	// The pod as stored reads as broken (internal/health, computed when read).
	var object []byte
	if err := conn.QueryRow(ctx, `SELECT object FROM kube_cdc.objects WHERE resource = 'pods' AND namespace = $1 AND name = 'web'`, ns).Scan(&object); err != nil {
		t.Fatal(err)
	}
	if h, err := health.Of("", "pods", object); err != nil || h != (health.Health{State: health.Failed, Reason: "CrashLoopBackOff: container app, 3 restarts"}) {
		t.Errorf("the stored pod's health: %v, %v; want failed: CrashLoopBackOff: container app, 3 restarts", h, err)
	}
}
