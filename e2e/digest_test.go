package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Secrets reach a sink only as keyed digests (docs/contract.md, Change log; the formula is
// config.example.yaml's): "hmac-sha256:" + hex(HMAC-SHA256(key, the value as the Secret
// holds it, base64 for data)). Keyed, so a weak value cannot be found by hashing guesses;
// the same key, so replicas and restarts write the same digest of the same value.
func TestSecretDigestsAreKeyedAndTheSameForEveryReplicaAndRestartUnderOneKey(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "dg")
	secrets := kube.Clientset().CoreV1().Secrets(ns)
	s, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Data:       map[string][]byte{"password": []byte("hunter2")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	update := func(edit func(*corev1.Secret)) {
		t.Helper()
		edit(s)
		if s, err = secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	resources := "  - name: secrets\n    namespaces: [" + ns + "]"

	// Two replicas, each into a database of its own, both with the key every daemon of
	// the package gets (e2eDigestKey).
	dsnA, dsnB := pg.NewDatabase(t), pg.NewDatabase(t)
	cfgA := pgConfig(t, dsnA, resources, "")
	a := start(t, "run", "-c", cfgA)
	b := start(t, "run", "-c", pgConfig(t, dsnB, resources, ""))
	connA, connB := connect(t, dsnA), connect(t, dsnB)

	first := digestAt(t, connA, ns, s.ResourceVersion)
	hexPart, keyed := cutDigest(first)
	if !keyed {
		t.Fatalf("password stored as %q, want hmac-sha256:<64 hex digits>", first)
	}
	for what, unkeyed := range map[string]string{
		"the value":  sha256Hex("hunter2"),
		"its base64": sha256Hex(base64.StdEncoding.EncodeToString([]byte("hunter2"))),
	} {
		if hexPart == unkeyed {
			t.Errorf("the digest is the unkeyed sha256 of %s: a dictionary of weak values reverses it", what)
		}
	}
	if want := hmacDigest(e2eDigestKey, "hunter2"); first != want {
		t.Errorf("digest %s, want %s (HMAC-SHA256 under the configured key of the base64 value)", first, want)
	}
	if got := digestAt(t, connB, ns, s.ResourceVersion); got != first {
		t.Errorf("replicas with one key disagree: %s and %s", first, got)
	}

	// A new value, a new digest, the same on both replicas.
	update(func(s *corev1.Secret) { s.Data["password"] = []byte("hunter3") })
	second := digestAt(t, connA, ns, s.ResourceVersion)
	if second == first || second != hmacDigest(e2eDigestKey, "hunter3") {
		t.Errorf("after the value changed: %s (before %s), want %s", second, first, hmacDigest(e2eDigestKey, "hunter3"))
	}
	if got := digestAt(t, connB, ns, s.ResourceVersion); got != second {
		t.Errorf("replicas with one key disagree after an update: %s and %s", second, got)
	}

	// A restart keeps the digest: replica a, stopped and started again, writes the
	// unchanged value's digest unchanged at the Secret's next change (a label).
	stopOK(t, a)
	a = start(t, "run", "-c", cfgA)
	update(func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "1"} })
	if got := digestAt(t, connA, ns, s.ResourceVersion); got != second {
		t.Errorf("after a restart the unchanged value's digest is %s, was %s", got, second)
	}
	stopOK(t, a)
	stopOK(t, b)

	// Another key (another deployment's, a rotated one), into a fresh database: another
	// digest of the same value.
	const otherKey = "another-e2e-digest-key-fedcba9876543210"
	t.Setenv("KUBE_CDC_TRANSFORMS__DIGESTKEY", otherKey)
	dsnC := pg.NewDatabase(t)
	c := start(t, "run", "-c", pgConfig(t, dsnC, resources, ""))
	other := digestAt(t, connect(t, dsnC), ns, s.ResourceVersion)
	if _, keyed := cutDigest(other); !keyed || other == second || other != hmacDigest(otherKey, "hunter3") {
		t.Errorf("under another key: %s, want %s (and not the first key's %s)", other, hmacDigest(otherKey, "hunter3"), second)
	}
	stopOK(t, c)
}

// digestAt waits for Secret db's row at rv in conn's database and returns the stored
// value of its password.
func digestAt(t *testing.T, conn *pgx.Conn, ns, rv string) string {
	t.Helper()
	var got string
	eventually(t, 60*time.Second, func() error {
		err := conn.QueryRow(context.Background(), `SELECT coalesce(object->'data'->>'password', '') FROM kube_cdc.objects
			WHERE resource = 'secrets' AND namespace = $1 AND name = 'db' AND resource_version = $2`, ns, rv).Scan(&got)
		if err != nil {
			return fmt.Errorf("Secret %s/db at RV %s: %w", ns, rv, err)
		}
		return nil
	})
	return got
}

// cutDigest returns the hex of a "hmac-sha256:<64 hex digits>" digest, and whether d is one.
func cutDigest(d string) (string, bool) {
	const prefix = "hmac-sha256:"
	if len(d) != len(prefix)+64 || d[:len(prefix)] != prefix {
		return "", false
	}
	h := d[len(prefix):]
	if _, err := hex.DecodeString(h); err != nil {
		return "", false
	}
	return h, true
}

// hmacDigest is the digest of a data value under key, computed here from the formula.
func hmacDigest(key, value string) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(base64.StdEncoding.EncodeToString([]byte(value))))
	return "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil))
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
