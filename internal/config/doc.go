// Package config loads kube-cdc's configuration (docs/contract.md, "CLI and configuration") and checks it
// before anything starts.
//
// Layers, each overriding the one before: defaults < YAML file < environment variables
// KUBE_CDC_… < command-line flags. Environment variable names are key paths in upper
// case with "__" between levels: KUBE_CDC_CLUSTER, KUBE_CDC_KUBERNETES__CONTEXT,
// KUBE_CDC_METRICS__ADDRESS, KUBE_CDC_LOG__LEVEL. Lists cannot be built from the
// environment; an element the file already has can be overridden by its index, which is
// how secrets usually arrive: KUBE_CDC_SINKS__0__POSTGRES__DSN,
// KUBE_CDC_SINKS__1__KAFKA__SASL__PASSWORD. A list of strings reads a comma-separated value
// (KUBE_CDC_TRANSFORMS__DROP=status,metadata.annotations.note).
//
// Every error names the key it is about and fits on one line, so a bad config fails at
// start with a message like
//
//	config: sinks[1].type: unknown sink type "elastic" (want postgres, kafka or stdout)
//
// Unknown keys are errors anywhere in the file, and in the environment under KUBE_CDC_.
// Each sink validates its own options block (postgres.Options.Validate and the Kafka and
// stdout sinks' alike, whose errors read "<key>: <reason>" under the block); Validate
// names the whole key.
package config
