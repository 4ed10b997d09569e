package bootimage_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// The Cluster API side, by the Machine API twin, is in bootimage/clusterapi.
var _ = Describe("Who is in charge", func() {
	DescribeTable("a Machine API MachineSet",
		func(authority machinev1beta1.MachineAuthority, action bootimage.Action, reason string) {
			d := decide(configv1.AWSPlatformType, awsOld, func(_ *bootimage.Cluster, o *bootimage.Object) { o.Authority = authority })
			Expect(d).To(And(HaveField("Action", action), HaveField("Reason", reason)), d.Message)
			Expect(d.LeftBehind()).To(BeFalse(), "not ours: no skew hold")
		},
		Entry("before the migration controller sets it", machinev1beta1.MachineAuthority(""), bootimage.Update, bootimage.ReasonImageOutdated),
		Entry("MachineAPI", machinev1beta1.MachineAuthorityMachineAPI, bootimage.Update, bootimage.ReasonImageOutdated),
		Entry("ClusterAPI: never written, even with the CAPI gate off", machinev1beta1.MachineAuthorityClusterAPI, bootimage.Skip, bootimage.ReasonAuthorityClusterAPI),
		Entry("Migrating", machinev1beta1.MachineAuthorityMigrating, bootimage.Skip, bootimage.ReasonMigrating),
	)

	It("reads status.authoritativeAPI", func() {
		ms := fixtures.MachineSet("worker-a", awsOld)
		ms.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
		Expect(bootimage.MachineSetObject(ms).Authority).To(Equal(machinev1beta1.MachineAuthorityClusterAPI))
	})
})
