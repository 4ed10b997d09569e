package controllers

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bootimage-operator/bootimage-operator/kube"
)

// NewScheme returns a scheme with the Kubernetes and OpenShift types the operator reads and writes.
func NewScheme() *runtime.Scheme { return kube.NewScheme() }
