package ui_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hiddenChars are characters that reorder or hide text: a right-to-left override, a
// left-to-right isolate and its pop, a zero-width space and a byte order mark.
var hiddenChars = []rune{'\u202E', '\u2066', '\u2069', '\u200B', '\uFEFF'}

func TestABidiOverrideInAConfigMapIsShownAsAMarkerByHistoryAndTheObjectPage(t *testing.T) {
	ctx := testCtx(t)
	ns := namespace(t, "ui-bidi")
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "flags"},
		Data: map[string]string{"allow": "false", "note": "plain"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Where the override is honoured, "\u202Eeslaf" reads "false": the line would pass for
	// the one it replaced.
	cm.Data["allow"] = "\u202Eeslaf"
	cm.Data["note"] = "a\u2066b\u2069c\u200Bd\uFEFF"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	recorded(t, "configmaps", ns, "flags", cm.ResourceVersion)
	wantLines := []string{
		"-  allow: \"false\"", // quoted by YAML, which would read it as a boolean
		"+  allow: ⟨U+202E⟩eslaf",
		// YAML writes the byte order mark as an escape of its own, in a quoted string.
		`+  note: "a⟨U+2066⟩b⟨U+2069⟩c⟨U+200B⟩d\uFEFF"`,
	}

	cmd := exec.Command(binary, "history", "-c", cfgPath, "configmaps", "flags", "-n", ns)
	cmd.Env = append(os.Environ(), "KUBE_CDC_TRANSFORMS__DIGESTKEY="+digestKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kube-cdc history: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	for _, want := range wantLines {
		if !slices.Contains(lines, want) {
			t.Errorf("kube-cdc history lacks the line %+q:\n%+q", want, out)
		}
	}
	for _, r := range hiddenChars {
		if strings.ContainsRune(string(out), r) {
			t.Errorf("kube-cdc history prints %U itself:\n%+q", r, out)
		}
	}

	srv := newServer(t, nil)
	code, body := get(t, srv, "/object?resource=configmaps&ns="+ns+"&name=flags")
	if code != 200 {
		t.Fatalf("object page: %d\n%s", code, body)
	}
	for _, want := range wantLines {
		class := map[byte]string{'+': "add", '-': "del"}[want[0]]
		span := `<span class="` + class + `">` + strings.ReplaceAll(strings.ReplaceAll(want, "+", "&#43;"), `"`, "&#34;") + "</span>"
		if !strings.Contains(body, span) {
			t.Errorf("the object page lacks %+q", span)
		}
	}
	for _, r := range hiddenChars {
		if strings.ContainsRune(body, r) {
			t.Errorf("the object page holds %U itself", r)
		}
	}
}
