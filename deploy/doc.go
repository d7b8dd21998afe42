// Package deploy holds the container profile of bastion serve: the
// image (Dockerfile), the Compose file (compose.yaml) and the Kubernetes
// manifest (kubernetes.yaml). It has no code; its tests lint the three
// files, property by property (docs/container.md), and deploy/smoke is
// the helper scripts/smoke-container.sh runs inside the sandbox.
package deploy
