// Package deploytest checks the deployment artefacts that are not Go: the Helm chart
// (deploy/helm/kube-cdc), docker-compose.yaml with deploy/compose/kube-cdc.yaml, and the
// Dockerfile. The tests render or load them with the same libraries Helm and Compose use
// and hold the result to the config package, so a chart or compose file can never ship a
// configuration kube-cdc would reject.
package deploytest
