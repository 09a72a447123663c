package deploytest

import (
	"encoding/base64"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The digest key of Secrets (values.yaml, digestKey): kube-cdc refuses to stream Secrets
// without one, and every replica and every restart must read the same one, so the chart
// keeps it in a Secret and hands it to the pod as KUBE_CDC_TRANSFORMS__DIGESTKEY.

const digestKeyEnv = "KUBE_CDC_TRANSFORMS__DIGESTKEY"

// valuesOf parses values written as YAML.
func valuesOf(t *testing.T, text string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValues([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// digestKeyVars returns the container's variables named KUBE_CDC_TRANSFORMS__DIGESTKEY.
func digestKeyVars(t *testing.T, r rendered) []corev1.EnvVar {
	t.Helper()
	c := into[appsv1.Deployment](t, r, "Deployment", "cdc-kube-cdc").Spec.Template.Spec.Containers[0]
	var out []corev1.EnvVar
	for _, e := range c.Env {
		if e.Name == digestKeyEnv {
			out = append(out, e)
		}
	}
	return out
}

// secretRefOf asserts exactly one digest key variable, from a secretKeyRef, and returns it.
func secretRefOf(t *testing.T, r rendered) *corev1.SecretKeySelector {
	t.Helper()
	vars := digestKeyVars(t, r)
	if len(vars) != 1 || vars[0].Value != "" || vars[0].ValueFrom == nil || vars[0].ValueFrom.SecretKeyRef == nil {
		t.Fatalf("%s: %+v, want one variable from a secretKeyRef", digestKeyEnv, vars)
	}
	return vars[0].ValueFrom.SecretKeyRef
}

// secretsOf returns the names of the rendered Secrets.
func secretsOf(r rendered) []string {
	var out []string
	for key, u := range r.objects {
		if u.GetKind() == "Secret" {
			out = append(out, key)
		}
	}
	return out
}

// notInConfigMapOrElsewhere asserts that key appears in no rendered object but the
// Secret holding it: not in the ConfigMap any ConfigMap reader sees, not in the pod spec.
func notInConfigMapOrElsewhere(t *testing.T, r rendered, key string, holder string) {
	t.Helper()
	for name, u := range r.objects {
		if name == holder {
			continue
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), key) {
			t.Errorf("the digest key is written in %s", name)
		}
	}
	cm := into[corev1.ConfigMap](t, r, "ConfigMap", "cdc-kube-cdc")
	if strings.Contains(cm.Data["config.yaml"], "digestKey") {
		t.Errorf("the ConfigMap names a digest key:\n%s", cm.Data["config.yaml"])
	}
}

const secretsInTeamA = `
config:
  resources:
    - name: configmaps
    - name: secrets
      namespaces: [team-a]
`

func TestChartGivesThePodTheDigestKeyOfTheUsersSecretAndMakesNone(t *testing.T) {
	r, err := renderValues(t, valuesOf(t, secretsInTeamA+`
replicas: 2
leaderElection: {enabled: true}
digestKey:
  existingSecret: cmdb-digest
  secretKey: key
`))
	if err != nil {
		t.Fatal(err)
	}
	if ref := secretRefOf(t, r); ref.Name != "cmdb-digest" || ref.Key != "key" {
		t.Errorf("%s from %s/%s, want cmdb-digest/key", digestKeyEnv, ref.Name, ref.Key)
	}
	if s := secretsOf(r); len(s) != 0 {
		t.Errorf("the chart made %v although the user's Secret holds the key", s)
	}
	// kube-cdc starts with what the pod gets: the file and the variable.
	const key = "0123456789abcdef0123456789abcdef"
	cfg := loadRenderedConfig(t, r, []string{digestKeyEnv + "=" + key})
	if string(cfg.Transforms.Key()) != key {
		t.Errorf("kube-cdc's key %q, want the Secret's", cfg.Transforms.Key())
	}
	if !strings.Contains(r.notes, "keyed by key of Secret observability/cmdb-digest.") {
		t.Errorf("NOTES:\n%s", r.notes)
	}
}

func TestChartMakesOneKeptDigestKeySecretAndGivesItToThePod(t *testing.T) {
	r, err := renderValues(t, valuesOf(t, secretsInTeamA+`
replicas: 2
leaderElection: {enabled: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	const name = "cdc-kube-cdc-digest-key"
	if s := secretsOf(r); len(s) != 1 || s[0] != "Secret/"+name {
		t.Fatalf("Secrets %v, want Secret/%s", s, name)
	}
	// Every replica's variable comes from this one Secret: one key for all.
	if ref := secretRefOf(t, r); ref.Name != name || ref.Key != "digest-key" {
		t.Errorf("%s from %s/%s, want %s/digest-key", digestKeyEnv, ref.Name, ref.Key, name)
	}
	secret := into[corev1.Secret](t, r, "Secret", name)
	if secret.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("annotations %v: uninstall would delete the key the sink's digests were made with", secret.Annotations)
	}
	key := string(secret.Data["digest-key"]) // what the pod's variable holds
	if raw, err := base64.StdEncoding.DecodeString(key); err != nil || len(raw) != 32 {
		t.Errorf("key %q: want 32 random bytes in base64 (%v)", key, err)
	}
	cfg := loadRenderedConfig(t, r, []string{digestKeyEnv + "=" + key})
	if string(cfg.Transforms.Key()) != key {
		t.Errorf("kube-cdc's key is not the Secret's")
	}
	notInConfigMapOrElsewhere(t, r, key, "Secret/"+name)
	if !strings.Contains(r.notes, "keyed by digest-key of Secret observability/"+name+", which the chart made") {
		t.Errorf("NOTES:\n%s", r.notes)
	}

	// Without a cluster to read the Secret back (helm template), each render makes a new
	// key; the chart's stability comes from lookup (TestChartOnAnAPIServer), not chance.
	again, err := renderValues(t, valuesOf(t, secretsInTeamA))
	if err != nil {
		t.Fatal(err)
	}
	if string(into[corev1.Secret](t, again, "Secret", name).Data["digest-key"]) == key {
		t.Error("two renders made the same key: it is not random")
	}
}

// kube-cdc needs a key only to stream core Secrets with redaction on, and the chart
// stands aside where the user passes the key another way.
func TestChartWiresNoDigestKeyWhereKubeCDCNeedsNoneOrTheUserPassesIt(t *testing.T) {
	for name, tt := range map[string]struct {
		values  string
		userVar bool // the user's own variable must be the only one
	}{
		"no Secrets streamed":             {values: "config:\n  resources: [{name: configmaps}, {name: secrets.example.com}]\n"},
		"the default resources":           {values: "config:\n  resources: null\n"},
		"redactSecrets false":             {values: secretsInTeamA + "  transforms: {redactSecrets: false}\n"},
		"digestKey.enabled false":         {values: secretsInTeamA + "digestKey: {enabled: false}\n"},
		"a digestKeyFile of the user's":   {values: secretsInTeamA + "  transforms: {digestKeyFile: /var/lib/kube-cdc/key}\n"},
		"the variable in extraEnv":        {values: secretsInTeamA + "extraEnv: [{name: " + digestKeyEnv + ", valueFrom: {secretKeyRef: {name: mine, key: k}}}]\n", userVar: true},
		"a kind, with redaction disabled": {values: "config:\n  resources: [{name: Secret}]\n  transforms: {redactSecrets: false}\n"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := renderValues(t, valuesOf(t, tt.values))
			if err != nil {
				t.Fatal(err)
			}
			if s := secretsOf(r); len(s) != 0 {
				t.Errorf("the chart made %v", s)
			}
			vars := digestKeyVars(t, r)
			switch {
			case tt.userVar && (len(vars) != 1 || vars[0].ValueFrom.SecretKeyRef.Name != "mine"):
				t.Errorf("%s: %+v, want only the user's", digestKeyEnv, vars)
			case !tt.userVar && len(vars) != 0:
				t.Errorf("%s: %+v, want none", digestKeyEnv, vars)
			}
			if strings.Contains(r.notes, "hmac-sha256 digests") {
				t.Errorf("NOTES name a key the chart did not wire:\n%s", r.notes)
			}
		})
	}
	// And where it is needed, each name form of core Secrets gets it.
	for _, name := range []string{"secrets", "secret", "Secret", "v1/secrets", "/v1/secrets"} {
		r, err := renderValues(t, resources(name))
		if err != nil {
			t.Fatal(err)
		}
		if ref := secretRefOf(t, r); ref.Name != "cdc-kube-cdc-digest-key" {
			t.Errorf("%s: key from %s", name, ref.Name)
		}
	}
}

// A key in config would be rendered into the ConfigMap, readable by anyone who may read
// ConfigMaps in the namespace: the render fails, and does not repeat the key.
func TestChartRefusesADigestKeyInItsConfig(t *testing.T) {
	const key = "do-not-render-me-0123456789"
	_, err := renderValues(t, valuesOf(t, secretsInTeamA+"  transforms: {digestKey: "+key+"}\n"))
	if err == nil {
		t.Fatal("rendered a digest key into the ConfigMap")
	}
	if !strings.Contains(err.Error(), "config.transforms.digestKey") || strings.Contains(err.Error(), key) {
		t.Errorf("error %q: want one naming config.transforms.digestKey, without the key", err)
	}
}
