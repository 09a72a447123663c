package main

import (
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

// connectSource finds the apiserver and builds the source's clients (source.Connect).
func connectSource(cfg *config.Config) (*kubeSource, error) {
	k := cfg.Kubernetes
	rc, clients, err := source.Connect(k.Kubeconfig, k.Context, source.ClientOptions{QPS: k.QPS, Burst: k.Burst, Compression: k.Compression})
	if err != nil {
		return nil, err
	}
	return &kubeSource{rest: rc, clients: clients}, nil
}
