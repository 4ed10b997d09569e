package bootimage_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

var _ = Describe("Boot image skew enforcement", func() {
	allMS := spec(mm(ms, operatorv1.All))
	base := bootimage.SkewInputs{Platform: configv1.AWSPlatformType, Topology: configv1.HighlyAvailableTopologyMode, Effective: allMS, Gates: cpmsOff, InstallVersion: "4.12.9"}
	manual := func(v string) operatorv1.BootImageSkewEnforcementStatus {
		return operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusManual, Manual: operatorv1.ClusterBootImageManual{Mode: operatorv1.ClusterBootImageSpecModeOCPVersion, OCPVersion: v}}
	}

	DescribeTable("status mode",
		func(mutate func(*bootimage.SkewInputs), want operatorv1.BootImageSkewEnforcementStatus) {
			in := base
			mutate(&in)
			Expect(bootimage.SkewEnforcementStatus(in)).To(Equal(want))
		},
		Entry("Automatic while MachineSets are managed with All, recording the install version", func(*bootimage.SkewInputs) {},
			operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusAutomatic, Automatic: operatorv1.ClusterBootImageAutomatic{OCPVersion: "4.12.9"}}),
		Entry("Automatic keeps the version recorded by boot image updates", func(in *bootimage.SkewInputs) {
			in.Current = operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusAutomatic, Automatic: operatorv1.ClusterBootImageAutomatic{OCPVersion: "4.20.0"}}
		}, operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusAutomatic, Automatic: operatorv1.ClusterBootImageAutomatic{OCPVersion: "4.20.0"}}),
		Entry("Manual with the install version when MachineSets are Partial", func(in *bootimage.SkewInputs) { in.Effective = spec(mm(ms, operatorv1.Partial)) }, manual("4.12.9")),
		Entry("Manual on an unmanaged platform", func(in *bootimage.SkewInputs) { in.Platform = configv1.NutanixPlatformType }, manual("4.12.9")),
		Entry("Manual on Azure Stack Hub, as the MCO's syncBootImageSkewEnforcementStatus without boot image support", func(in *bootimage.SkewInputs) { in.Platform = bootimage.AzureStackHub }, manual("4.12.9")),
		Entry("None on single-node", func(in *bootimage.SkewInputs) { in.Topology = configv1.SingleReplicaTopologyMode },
			operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusNone}),
		Entry("None on bare metal", func(in *bootimage.SkewInputs) { in.Platform = configv1.BareMetalPlatformType },
			operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusNone}),
		Entry("the spec's Manual wins", func(in *bootimage.SkewInputs) {
			in.Spec = operatorv1.BootImageSkewEnforcementConfig{Mode: operatorv1.BootImageSkewEnforcementConfigModeManual, Manual: operatorv1.ClusterBootImageManual{Mode: operatorv1.ClusterBootImageSpecModeOCPVersion, OCPVersion: "4.16.0"}}
		}, manual("4.16.0")),
		Entry("the spec's None wins", func(in *bootimage.SkewInputs) {
			in.Spec = operatorv1.BootImageSkewEnforcementConfig{Mode: operatorv1.BootImageSkewEnforcementConfigModeNone}
		}, operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusNone}),
	)

	DescribeTable("violation",
		func(status operatorv1.BootImageSkewEnforcementStatus, want string) {
			Expect(bootimage.SkewViolation(status)).To(ContainSubstring(want))
			if want == "" {
				Expect(bootimage.SkewViolation(status)).To(BeEmpty())
			}
		},
		Entry("OCP 4.12 is too old", manual("4.12.9"), "boot images are from OCP 4.12.9, older than the oldest supported OCP 4.13.0: update the boot images of your MachineSets and record the new version in spec.bootImageSkewEnforcement.manual"),
		Entry("OCP 4.13.0 is fine", manual("4.13.0"), ""),
		Entry("RHCOS 9.0 is too old", operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusAutomatic, Automatic: operatorv1.ClusterBootImageAutomatic{RHCOSVersion: "9.0.20220101-0"}}, "(RHEL 9.0), older than the oldest supported RHEL 9.2"),
		Entry("legacy RHCOS 412.86 is too old", operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusAutomatic, Automatic: operatorv1.ClusterBootImageAutomatic{RHCOSVersion: "412.86.202301311551-0"}}, "RHEL 8.6"),
		Entry("legacy RHCOS 413.92 is fine", operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusAutomatic, Automatic: operatorv1.ClusterBootImageAutomatic{RHCOSVersion: "413.92.202305021736-0"}}, ""),
		Entry("None enforces nothing", operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusNone}, ""),
	)

	automatic := func(ocp, rhcos string) operatorv1.BootImageSkewEnforcementStatus {
		return operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusAutomatic, Automatic: operatorv1.ClusterBootImageAutomatic{OCPVersion: ocp, RHCOSVersion: rhcos}}
	}
	DescribeTable("Automatic records what a pass achieved",
		func(current operatorv1.BootImageSkewEnforcementStatus, install string, pass *bootimage.SkewPass, want operatorv1.BootImageSkewEnforcementStatus) {
			in := base
			in.Current, in.InstallVersion, in.Pass = current, install, pass
			Expect(bootimage.SkewEnforcementStatus(in)).To(Equal(want))
		},
		Entry("every MachineSet current: the stream's release", automatic("4.12.9", ""), "4.12.9", &bootimage.SkewPass{ReleaseVersion: "4.21.3"}, automatic("4.21.3", "")),
		Entry("a nightly release is x.y.z", automatic("4.12.9", ""), "4.12.9", &bootimage.SkewPass{ReleaseVersion: "4.22.0-0.nightly-2026-11-20-121212"}, automatic("4.22.0", "")),
		Entry("an OKD release is x.y.z", automatic("4.12.9", ""), "4.12.9", &bootimage.SkewPass{ReleaseVersion: "4.21.0-okd-scos.5"}, automatic("4.21.0", "")),
		Entry("marketplace: the RHCOS version chosen", automatic("4.12.9", ""), "4.12.9", &bootimage.SkewPass{ReleaseVersion: "4.21.3", RHCOSVersion: "9.6.20260210-0"}, automatic("", "9.6.20260210-0")),
		Entry("one left behind: the install version", automatic("4.21.3", ""), "4.12.9", &bootimage.SkewPass{ReleaseVersion: "4.21.3", LeftBehind: []string{"custom"}}, automatic("4.12.9", "")),
		Entry("errors: the previous record", automatic("4.20.0", ""), "4.12.9", &bootimage.SkewPass{ReleaseVersion: "4.21.3", Errors: 1}, automatic("4.20.0", "")),
		Entry("under way: the previous record", automatic("4.20.0", ""), "4.12.9", nil, automatic("4.20.0", "")),
		Entry("an invalid previous record is never kept", automatic("4.20", ""), "4.12.9", nil, automatic("4.12.9", "")),
		Entry("an unparseable release keeps the previous record", automatic("4.20.0", ""), "4.12.9", &bootimage.SkewPass{ReleaseVersion: ""}, automatic("4.20.0", "")),
		Entry("no install version: 0.0.0, as the MCO", operatorv1.BootImageSkewEnforcementStatus{}, "", nil, automatic("0.0.0", "")),
	)

	cond := func(t string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: t, Status: status, Message: "m"}
	}
	DescribeTable("the upgrade guard",
		func(skew operatorv1.BootImageSkewEnforcementStatus, conditions []metav1.Condition, blocked bool, message string) {
			g := bootimage.EvaluateSkewGuard(operatorv1.MachineConfigurationStatus{BootImageSkewEnforcementStatus: skew, Conditions: conditions})
			Expect(g.Blocked).To(Equal(blocked))
			Expect(g.Message).To(ContainSubstring(message))
		},
		Entry("Automatic, old, pass finished: blocked", automatic("4.12.9", ""), []metav1.Condition{cond(operatorv1.MachineConfigurationBootImageUpdateProgressing, metav1.ConditionFalse)}, true, "OCP 4.12.9"),
		Entry("Automatic, old, still progressing: not decided yet", automatic("4.12.9", ""), []metav1.Condition{cond(operatorv1.MachineConfigurationBootImageUpdateProgressing, metav1.ConditionTrue)}, false, ""),
		Entry("Automatic, first pass not done: not decided yet", automatic("4.12.9", ""), nil, false, ""),
		Entry("Automatic, degraded: blocked by the failures", automatic("4.21.0", ""), []metav1.Condition{cond(operatorv1.MachineConfigurationBootImageUpdateDegraded, metav1.ConditionTrue)}, true, "boot image updates are failing: m"),
		Entry("Automatic, current: not blocked", automatic("4.21.0", ""), []metav1.Condition{cond(operatorv1.MachineConfigurationBootImageUpdateProgressing, metav1.ConditionFalse)}, false, ""),
		Entry("Manual, old: blocked whatever progresses", manual("4.11.0"), []metav1.Condition{cond(operatorv1.MachineConfigurationBootImageUpdateProgressing, metav1.ConditionTrue)}, true, "OCP 4.11.0"),
		Entry("None: never", operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusNone}, nil, false, ""),
		Entry("unknown install version says so", automatic("0.0.0", ""), []metav1.Condition{cond(operatorv1.MachineConfigurationBootImageUpdateProgressing, metav1.ConditionFalse)}, true, "version of the cluster's boot images is unknown"),
	)
})
