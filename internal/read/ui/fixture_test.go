package ui_test

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The objects the page tests look at, written once through the apiserver and recorded
// by the daemon.
type world struct {
	ns          string
	parentUID   string
	deletedName string
	appID       string // the app-config ConfigMap's name
	secretValue string
	xssName     string
	xssScript   string
}

const xssPayload = `<script>window.__xss=1</script><img src=x onerror="window.__xss=1">"'&`

var (
	worldOnce sync.Once
	shared    world
	worldErr  string
)

// theWorld writes, in namespace ui-world: app-config created then updated (color red →
// blue, by the field manager alice-tool), parent and child (child owned by parent), gone
// (created then deleted), a Secret, and xss (HTML and script in its annotations and data).
func theWorld(t *testing.T) world {
	t.Helper()
	worldOnce.Do(func() {
		w := world{ns: namespace(t, "ui-world"), deletedName: "gone", appID: "app-config", secretValue: "hunter2-plain-value",
			xssName: "xss", xssScript: xssPayload}
		ctx := testCtx(t)
		cms := kube.Clientset().CoreV1().ConfigMaps(w.ns)
		alice := metav1.CreateOptions{FieldManager: "alice-tool"}
		app, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.appID},
			Data: map[string]string{"color": "red", "size": "large"}}, alice)
		if err != nil {
			t.Fatal(err)
		}
		app.Data["color"] = "blue"
		if app, err = cms.Update(ctx, app, metav1.UpdateOptions{FieldManager: "alice-tool"}); err != nil {
			t.Fatal(err)
		}
		parent, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.parentUID = string(parent.UID)
		yes := true
		child, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "child",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "parent", UID: parent.UID, Controller: &yes}}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.deletedName}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, w.deletedName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		sec, err := kube.Clientset().CoreV1().Secrets(w.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-password"},
			StringData: map[string]string{"password": w.secretValue}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Label values and names cannot hold markup (the apiserver validates them); an
		// annotation's value and the data can hold anything.
		xss, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.xssName,
			Labels: map[string]string{"app": "x-script-x"}, Annotations: map[string]string{"note": xssPayload}},
			Data: map[string]string{"page.html": xssPayload}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		recorded(t, "configmaps", w.ns, w.appID, app.ResourceVersion)
		recorded(t, "configmaps", w.ns, "child", child.ResourceVersion)
		recorded(t, "configmaps", w.ns, "parent", parent.ResourceVersion)
		recorded(t, "configmaps", w.ns, w.xssName, xss.ResourceVersion)
		recorded(t, "secrets", w.ns, "db-password", sec.ResourceVersion)
		waitDeleted(t, w.ns, w.deletedName)
		shared = w
	})
	if shared.ns == "" {
		t.Fatal("the shared objects could not be written (see the first test's failure)")
	}
	return shared
}

func waitDeleted(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, "the delete of "+ns+"/"+name+" recorded", func(ctx context.Context) bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.changes WHERE cluster = $1 AND namespace = $2 AND name = $3 AND op = 'delete'`,
			cluster, ns, name).Scan(&n)
		return err == nil && n == 1
	})
}
