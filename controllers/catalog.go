package controllers

import "github.com/bootimage-operator/bootimage-operator/kube"

// Cloud credentials Secrets in openshift-machine-api (kube holds them, for both front ends).
const (
	AWSCredentialsSecret = kube.AWSCredentialsSecret
	GCPCredentialsSecret = kube.GCPCredentialsSecret
)
