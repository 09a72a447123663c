package source

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig finds the apiserver: in-cluster first when neither kubeconfig nor context is
// given, then the kubeconfig file (kubeconfig, else $KUBECONFIG, ~/.kube/config) and its
// context (the current one when "").
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	if kubeconfig == "" && context == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	return cfg, nil
}

// Connect finds the apiserver (RESTConfig) and builds the source's clients. The
// rest.Config it returns serves every other client: it times out after a minute unless
// the kubeconfig says otherwise (LIST pages and discovery; watches have no timeout), and
// opts' QPS and burst hold for it too (access reviews, leader election, signals), not
// only for the source: at client-go's default of 5/s the start's two access reviews per
// resource took 3.3 s for the 13 default resources.
func Connect(kubeconfig, context string, opts ClientOptions) (*rest.Config, *Clients, error) {
	rc, err := RESTConfig(kubeconfig, context)
	if err != nil {
		return nil, nil, err
	}
	if rc.Timeout == 0 {
		rc.Timeout = time.Minute
	}
	rc.QPS, rc.Burst = opts.QPS, opts.Burst
	clients, err := NewClients(rc, opts)
	if err != nil {
		return nil, nil, err
	}
	return rc, clients, nil
}
