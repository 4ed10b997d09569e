package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	controller "github.com/bootimage-operator/bootimage-operator/refreshcontroller"
)

var _ = Describe("DaemonPod", func() {
	It("runs the daemon on one node in HyperShift mode, with the ConfigMap inside the root it chroots into", func() {
		pod := controller.DaemonPod("workers", "node-a", "mcd:1")
		Expect(pod.Namespace).To(Equal("workers-upgrade"))
		Expect(pod.Name).To(Equal("machine-config-daemon-node-a"))
		Expect(pod.Spec.NodeName).To(Equal("node-a"))
		Expect(pod.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
		c := pod.Spec.Containers[0]
		Expect(c.Args).To(ContainElements("start", "--node-name=node-a", "--root-mount=/rootfs", "--desired-configmap=/etc/machine-config-daemon-desired-config"))
		Expect(c.Args).NotTo(ContainElement(HavePrefix("--onceFrom")), "once-from is another mode than HyperShift's")
		Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "config", MountPath: "/rootfs/etc/machine-config-daemon-desired-config"}))
		Expect(pod.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.ConfigMap.Name", "workers-upgrade")))
	})
})
