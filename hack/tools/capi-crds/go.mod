module github.com/bootimage-operator/bootimage-operator/hack/tools/capi-crds

// The Cluster API CRDs the test harness serves (manifests.CAPICRDPaths): each module's
// config/crd/bases, read from the module cache. No Go code of these modules is built, and none
// enters the root or refresh/ module graph. cluster-api at the minor cluster-capi-operator uses
// (v1.13 at 409c6b44).
go 1.26.0

require (
	sigs.k8s.io/cluster-api v1.13.6
	sigs.k8s.io/cluster-api-provider-aws/v2 v2.13.0
	sigs.k8s.io/cluster-api-provider-azure v1.26.0
	sigs.k8s.io/cluster-api-provider-gcp v1.13.1
)
