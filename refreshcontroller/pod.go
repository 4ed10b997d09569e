package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
)

// DaemonPodLabel marks the daemon pods this controller runs.
const DaemonPodLabel = "hypershift.openshift.io/config-refresh"

// Where the daemon finds the host and, inside it (the daemon chroots into the root mount), the
// upgrade ConfigMap, as HyperShift's upgrader runs it.
const (
	RootMount          = "/rootfs"
	DesiredConfigMount = "/etc/machine-config-daemon-desired-config"
)

// DaemonPod is the machine-config-daemon pod of a pool on a node: the name, namespace, arguments
// and mounts the in-place upgrader uses too, so the two never run two daemons on one node. Unlike
// the upgrader's (OnFailure) it never restarts: a daemon that exits with an error leaves a Failed
// pod, which the plan reports and retries only with a new target.
func DaemonPod(poolName, node, image string) *corev1.Pod {
	ns, cm := hypershift.UpgradeNames(poolName)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hypershift.DaemonPodName(node), Labels: map[string]string{DaemonPodLabel: "true"}},
		Spec: corev1.PodSpec{
			NodeName: node, HostPID: true, HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "machine-config-daemon", Image: image,
				Command: []string{"/usr/bin/machine-config-daemon"},
				Args: []string{"start", "--node-name=" + node, "--root-mount=" + RootMount,
					"--kubeconfig=/var/lib/kubelet/kubeconfig", "--desired-configmap=" + DesiredConfigMount},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				SecurityContext:          &corev1.SecurityContext{Privileged: ptr.To(true)},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "rootfs", MountPath: RootMount},
					{Name: "config", MountPath: RootMount + DesiredConfigMount},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "rootfs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}},
			},
		},
	}
}
