package bootimage

import corev1 "k8s.io/api/core/v1"

// ControlPlaneRoles are the node role labels of the control plane, the current one before the
// legacy one.
var ControlPlaneRoles = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// ControlPlaneArch returns the control plane's Kubernetes architecture from the labels of the
// cluster's nodes: the kubernetes.io/arch of a node with the control-plane role, else of one with
// the master role. When no such node says, it is fallback: the front end knows what to assume (the
// operator its own architecture, as it runs on the control plane).
func ControlPlaneArch(nodeLabels []map[string]string, fallback string) string {
	for _, role := range ControlPlaneRoles {
		for _, labels := range nodeLabels {
			if _, ok := labels[role]; !ok {
				continue
			}
			if arch := labels[corev1.LabelArchStable]; arch != "" {
				return arch
			}
		}
	}
	return fallback
}
