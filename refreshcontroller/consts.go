// Package controller is a reference config refresh controller for HyperShift NodePools, built
// only on refresh/hypershift and refresh/pool. It reads the NodePool, its token Secret and its
// Cluster API MachineDeployment and MachineSet on the management side, the Nodes and daemon pods
// on the guest side, and writes only the guest's <pool>-upgrade namespace, ConfigMap, daemon pods
// and node annotations, and the NodePool's ConfigRefresh conditions.
package controller

import "k8s.io/apimachinery/pkg/runtime/schema"

// Objects read on the management side, as unstructured: HyperShift's API module is not served by
// the Go module proxy, and Cluster API's Go types would raise the requirements above the pins.
var (
	NodePoolGVK          = schema.GroupVersionKind{Group: "hypershift.openshift.io", Version: "v1beta1", Kind: "NodePool"}
	MachineDeploymentGVK = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"}
	MachineSetGVK        = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineSet"}
	MachineGVK           = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}
)

const (
	// NodePoolLabel is HyperShift's label on a guest Node naming its NodePool.
	NodePoolLabel = "hypershift.openshift.io/nodePool"
	// NodePoolCurrentConfigAnnotation is the rollout target the pool's nodes were built with
	// (HashWithoutVersion, pinned by the hash split on a payload-only change).
	NodePoolCurrentConfigAnnotation = "hypershift.openshift.io/nodePoolCurrentConfig"
	// UpgradedRefreshConfig is the currentRefreshConfig of a node the in-place upgrader left on
	// a payload no payload hash names: it is behind any target, so the refresh re-evaluates it.
	UpgradedRefreshConfig = "upgraded"
	// TokenSecretRefreshConfigKey is the token Secret key naming the payload hash of the config
	// its payload was generated from. HyperShift has none (docs/hypershift.md): the ignition
	// server must write it with payload, or the controller cannot tell a payload from its hash.
	TokenSecretRefreshConfigKey = "payload-refresh-config"
	// DaemonCapabilitiesAnnotation is a node annotation the daemon would set (proposed; no MCO
	// daemon sets it today): a comma-separated list of what it can do beyond today's HyperShift
	// mode, which runs only Reboot, None and Reload crio.
	DaemonCapabilitiesAnnotation = "hypershift.openshift.io/daemonCapabilities"
	// CapabilityRestart says the daemon runs Restart actions (node disruption policies).
	CapabilityRestart = "Restart"
	// PayloadInPlaceAnnotation, on the upgrade ConfigMap, is when this controller first saw the
	// token Secret hold the payload of the ConfigMap's hash (RFC 3339, its own clock): a Machine
	// created after it booted that payload (docs/hypershift.md, nodes that join).
	PayloadInPlaceAnnotation = "hypershift.openshift.io/payloadInPlaceSince"
	// FieldManager names this controller's writes.
	FieldManager = "config-refresh-controller"
)

// TokenSecretName is HyperShift's token Secret of a NodePool for a config hash.
func TokenSecretName(nodePool, hash string) string { return "token-" + nodePool + "-" + hash }
