package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
)

// DaemonPodLabel marks the daemon pods this controller runs.
const DaemonPodLabel = "hypershift.openshift.io/config-refresh"

// Where the daemon reads the upgrade ConfigMap and the host, as HyperShift's upgrader mounts them.
const (
	DesiredConfigMount = "/etc/machine-config-daemon-desired-config"
	RootMount          = "/rootfs"
)

// DaemonPod is the machine-config-daemon pod of a pool on a node: the name the in-place upgrader
// uses too, so the two never run two daemons on one node.
func DaemonPod(poolName, node, image string) *corev1.Pod {
	ns, cm := hypershift.UpgradeNames(poolName)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hypershift.DaemonPodName(node), Labels: map[string]string{DaemonPodLabel: "true"}},
		Spec: corev1.PodSpec{
			NodeName: node, HostPID: true, RestartPolicy: corev1.RestartPolicyNever,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "machine-config-daemon", Image: image,
				Command:         []string{"/usr/bin/machine-config-daemon"},
				Args:            []string{"start", "--node-name=" + node, "--root-mount=" + RootMount, "--desired-configmap=" + DesiredConfigMount, "--onceFrom=" + DesiredConfigMount},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "rootfs", MountPath: RootMount},
					{Name: "config", MountPath: DesiredConfigMount},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "rootfs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}},
			},
		},
	}
}
