package main

import (
	"time"

	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

type kubeSource struct {
	rest    *rest.Config
	clients *source.Clients
}

// restConfig finds the apiserver (source.RESTConfig).
func restConfig(k config.Kubernetes) (*rest.Config, error) {
	return source.RESTConfig(k.Kubeconfig, k.Context)
}

func connectSource(cfg *config.Config) (*kubeSource, error) {
	rc, err := restConfig(cfg.Kubernetes)
	if err != nil {
		return nil, err
	}
	if rc.Timeout == 0 {
		rc.Timeout = time.Minute // LIST pages and discovery; watches have no timeout
	}
	// kubernetes.qps and burst hold for every client (access reviews, leader election,
	// signals), not only the source's: at client-go's default of 5/s the start's two
	// access reviews per resource took 3.3 s for the 13 default resources.
	rc.QPS, rc.Burst = cfg.Kubernetes.QPS, cfg.Kubernetes.Burst
	clients, err := source.NewClients(rc, source.ClientOptions{QPS: cfg.Kubernetes.QPS, Burst: cfg.Kubernetes.Burst, Compression: cfg.Kubernetes.Compression})
	if err != nil {
		return nil, err
	}
	return &kubeSource{rest: rc, clients: clients}, nil
}
