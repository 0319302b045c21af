//go:build tools

// Package tools pins the kube-apiserver command as a dependency of this module so that
// `go mod tidy` keeps what `go build k8s.io/kubernetes/cmd/kube-apiserver` needs.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
