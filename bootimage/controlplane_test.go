package bootimage_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

var _ = DescribeTable("ControlPlaneArch",
	func(nodes []map[string]string, want string) {
		Expect(bootimage.ControlPlaneArch(nodes, "riscv64")).To(Equal(want))
	},
	Entry("a control-plane node", []map[string]string{
		{"node-role.kubernetes.io/worker": "", "kubernetes.io/arch": "amd64"},
		{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/arch": "arm64"},
	}, "arm64"),
	Entry("only the legacy master role", []map[string]string{
		{"node-role.kubernetes.io/master": "", "kubernetes.io/arch": "s390x"},
	}, "s390x"),
	Entry("the control-plane role before master", []map[string]string{
		{"node-role.kubernetes.io/master": "", "kubernetes.io/arch": "amd64"},
		{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/arch": "arm64"},
	}, "arm64"),
	Entry("a control-plane node without an arch label", []map[string]string{
		{"node-role.kubernetes.io/control-plane": ""},
		{"node-role.kubernetes.io/master": "", "kubernetes.io/arch": "ppc64le"},
	}, "ppc64le"),
	Entry("workers only: the fallback", []map[string]string{
		{"node-role.kubernetes.io/worker": "", "kubernetes.io/arch": "s390x"},
	}, "riscv64"),
	Entry("no nodes: the fallback", nil, "riscv64"),
)
