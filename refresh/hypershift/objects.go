package hypershift

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachineSet annotations by which HyperShift's NodePool controller and in-place upgrader talk
// (openshift/hypershift 3ee96155).
const (
	// MachineSetTargetConfigVersionAnnotation is the config hash the pool upgrades to; only
	// in-place pools have it.
	MachineSetTargetConfigVersionAnnotation = "hypershift.openshift.io/nodePoolTargetConfigVersion"
	// MachineSetCurrentConfigVersionAnnotation is the config hash every node has reached.
	MachineSetCurrentConfigVersionAnnotation = "hypershift.openshift.io/nodePoolCurrentConfigVersion"
	// MachineSetUpgradeInProgressTrueAnnotation is set, with a progress message, while nodes upgrade.
	MachineSetUpgradeInProgressTrueAnnotation = "hypershift.openshift.io/nodePoolUpgradeInProgressTrue"
	// MachineSetUpgradeInProgressFalseAnnotation is set, with the reason, when a node degraded.
	MachineSetUpgradeInProgressFalseAnnotation = "hypershift.openshift.io/nodePoolUpgradeInProgressFalse"
	// MachineSetMaxUnavailableAnnotation bounds the nodes upgrading at once (an integer).
	MachineSetMaxUnavailableAnnotation = "hypershift.openshift.io/nodePoolMaxUnavailable"
)

// NodePool annotations of the hash split (proposed here; HyperShift has none yet), beside
// RecordAnnotation.
const (
	// NodePoolTargetRefreshConfigAnnotation is the payload hash (Split.Payload) the pool's nodes
	// should run.
	NodePoolTargetRefreshConfigAnnotation = "hypershift.openshift.io/nodePoolTargetRefreshConfig"
	// NodePoolCurrentRefreshConfigAnnotation is the payload hash every node has reached.
	NodePoolCurrentRefreshConfigAnnotation = "hypershift.openshift.io/nodePoolCurrentRefreshConfig"
)

// Keys of HyperShift's token Secret read by the in-place upgrader. Its payload is already
// EncodePayload's encoding and goes to the ConfigMap's config key unchanged.
const (
	TokenSecretPayloadKey        = "payload"
	TokenSecretReleaseKey        = "release"
	TokenSecretReleaseVersionKey = "release-version"
)

// InPlaceUpgradeInProgress says whether a MachineSet's annotations show an in-place upgrade:
// a target config version that differs from the current one, or the in-progress annotation.
func InPlaceUpgradeInProgress(machineSetAnnotations map[string]string) bool {
	if target, ok := machineSetAnnotations[MachineSetTargetConfigVersionAnnotation]; ok && target != machineSetAnnotations[MachineSetCurrentConfigVersionAnnotation] {
		return true
	}
	_, ok := machineSetAnnotations[MachineSetUpgradeInProgressTrueAnnotation]
	return ok
}

// DaemonPodName is the name of the machine-config-daemon pod on a node, in the pool's upgrade
// namespace. The refresh and the in-place upgrader must use the same name, so neither runs a
// second daemon on a node.
func DaemonPodName(node string) string { return "machine-config-daemon-" + node }

// UpgradeNamespaceLabels are the labels HyperShift puts on a pool's upgrade namespace: the
// daemon pods are privileged, and the label syncer must not lower that.
var UpgradeNamespaceLabels = map[string]string{
	"pod-security.kubernetes.io/enforce":             "privileged",
	"pod-security.kubernetes.io/audit":               "privileged",
	"pod-security.kubernetes.io/warn":                "privileged",
	"security.openshift.io/scc.podSecurityLabelSync": "false",
}

// UpgradeNamespace returns a pool's upgrade namespace with UpgradeNamespaceLabels.
func UpgradeNamespace(pool string) *corev1.Namespace {
	name, _ := UpgradeNames(pool)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	SetUpgradeNamespaceLabels(ns)
	return ns
}

// SetUpgradeNamespaceLabels sets UpgradeNamespaceLabels on ns, keeping its other labels, and
// says whether anything changed.
func SetUpgradeNamespaceLabels(ns *corev1.Namespace) bool {
	return setEntries(&ns.Labels, UpgradeNamespaceLabels)
}

// setEntries sets want's entries in *m, keeping its others, and says whether anything changed.
func setEntries(m *map[string]string, want map[string]string) bool {
	if *m == nil {
		*m = map[string]string{}
	}
	changed := false
	for k, v := range want {
		if old, ok := (*m)[k]; !ok || old != v {
			(*m)[k] = v
			changed = true
		}
	}
	return changed
}

// NodePoolCondition has the fields of HyperShift's hyperv1.NodePoolCondition, in its order and
// with its types, so HyperShift converts one with hyperv1.NodePoolCondition(c).
type NodePoolCondition struct {
	Type               string                 `json:"type"`
	Status             corev1.ConditionStatus `json:"status"`
	Severity           string                 `json:"severity,omitempty"`
	LastTransitionTime metav1.Time            `json:"lastTransitionTime"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
	ObservedGeneration int64                  `json:"observedGeneration,omitempty"`
}

// NodePoolConditions converts refresh/pool's Plan conditions to NodePool conditions for a NodePool of the
// given generation. The transition time is left to HyperShift's SetStatusCondition, which keeps
// it while the status stays and sets it when the status changes.
func NodePoolConditions(conditions []metav1.Condition, generation int64) []NodePoolCondition {
	out := make([]NodePoolCondition, 0, len(conditions))
	for _, c := range conditions {
		out = append(out, NodePoolCondition{
			Type: c.Type, Status: corev1.ConditionStatus(c.Status), LastTransitionTime: c.LastTransitionTime,
			Reason: c.Reason, Message: c.Message, ObservedGeneration: generation,
		})
	}
	return out
}
