package main

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kube-cdc/kube-cdc/internal/config"
)

// The clients built from the source's rest config (access reviews at start, leader
// election, resnapshot signals) must honour kubernetes.qps and burst: at client-go's
// default of 5 requests/s the start's two access reviews per resource took seconds.
func TestEveryKubernetesClientOfTheDaemonHonoursTheConfiguredRateLimit(t *testing.T) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	src, err := connectSource(&config.Config{Kubernetes: config.Kubernetes{Kubeconfig: path, QPS: 70, Burst: 140}})
	if err != nil {
		t.Fatal(err)
	}
	if src.rest.QPS != 70 || src.rest.Burst != 140 {
		t.Fatalf("the daemon's rest config has qps %v burst %d; want the configured 70 and 140", src.rest.QPS, src.rest.Burst)
	}
}
