package status

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

var _ = Describe("The status apply configuration", func() {
	asJSON := func(status operatorv1.MachineConfigurationStatus) map[string]any {
		raw, err := json.Marshal(statusApply(status))
		Expect(err).NotTo(HaveOccurred())
		var out map[string]any
		Expect(json.Unmarshal(raw, &out)).To(Succeed())
		return out
	}
	at := metav1.Date(2026, 1, 1, 0, 0, 0, 0, metav1.Now().Location())
	full := operatorv1.MachineConfigurationStatus{
		ObservedGeneration: 3,
		Conditions:         []metav1.Condition{{Type: ConditionBootImageUpdateProgressing, Status: metav1.ConditionFalse, Reason: ReasonAsExpected, Message: "m", ObservedGeneration: 3, LastTransitionTime: at}},
		// The MCO's: never this operator's, whatever it holds.
		NodeDisruptionPolicyStatus: operatorv1.NodeDisruptionPolicyStatus{ClusterPolicies: operatorv1.NodeDisruptionPolicyClusterStatus{
			Files: []operatorv1.NodeDisruptionPolicyStatusFile{{Path: "/etc/x"}}}},
		ManagedBootImagesStatus: operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{{
			Resource: operatorv1.MachineSets, APIGroup: operatorv1.MachineAPI,
			Selection: operatorv1.MachineManagerSelector{Mode: operatorv1.Partial, Partial: &operatorv1.PartialSelector{
				MachineResourceSelector: &metav1.LabelSelector{
					MatchLabels:      map[string]string{"role": "infra"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}}}}}},
		BootImageSkewEnforcementStatus: operatorv1.BootImageSkewEnforcementStatus{
			Mode: operatorv1.BootImageSkewEnforcementModeStatusAutomatic, Automatic: operatorv1.ClusterBootImageAutomatic{OCPVersion: "4.20.3"}},
	}

	It("names only the fields this operator owns, each as the typed status has it", func() {
		got := asJSON(full)
		Expect(got).To(HaveLen(4))
		Expect(got).To(HaveKeyWithValue("observedGeneration", BeNumerically("==", 3)))
		Expect(got).NotTo(HaveKey("nodeDisruptionPolicyStatus"))

		// Each owned field round-trips to what the typed status says.
		typed, err := json.Marshal(full)
		Expect(err).NotTo(HaveOccurred())
		var want map[string]any
		Expect(json.Unmarshal(typed, &want)).To(Succeed())
		for _, field := range []string{"conditions", "managedBootImagesStatus", "bootImageSkewEnforcementStatus"} {
			Expect(got[field]).To(Equal(want[field]), field)
		}
	})

	It("leaves the skew enforcement status unclaimed when it has no mode", func() {
		status := full
		status.BootImageSkewEnforcementStatus = operatorv1.BootImageSkewEnforcementStatus{}
		Expect(asJSON(status)).NotTo(HaveKey("bootImageSkewEnforcementStatus"))
	})
})

var _ = Describe("The skew guard's Event", func() {
	guardEvent := func(w *Writer, guard bootimage.SkewGuard, leftBehind []string) string {
		recorder := record.NewFakeRecorder(1)
		w.Recorder = recorder
		Expect(w.ReportGuard(context.Background(), &operatorv1.MachineConfiguration{}, guard, leftBehind)).To(Succeed())
		return <-recorder.Events
	}

	It("names no skipped MachineSets when failing updates are what blocks", func() {
		msg := guardEvent(&Writer{}, bootimage.SkewGuard{Blocked: true, Failing: true, Message: "Upgrades are blocked because boot image updates are failing: 1 failed: MachineSet openshift-machine-api/broken"}, []string{"custom"})
		Expect(msg).To(ContainSubstring("openshift-machine-api/broken"))
		Expect(msg).NotTo(ContainSubstring("custom"))
	})

	It("names the MachineSets left behind when the recorded skew is what blocks", func() {
		msg := guardEvent(&Writer{}, bootimage.SkewGuard{Blocked: true, Message: "Upgrades are blocked: the cluster's boot images are from OCP 4.9.0"}, []string{"custom"})
		Expect(msg).To(ContainSubstring("cannot update: custom"))
	})

	It("says upgrades are blocked only where it sets the block on a ClusterOperator itself", func() {
		msg := guardEvent(&Writer{}, bootimage.SkewGuard{Blocked: true, Message: "Upgrades are blocked: the cluster's boot images are from OCP 4.9.0"}, nil)
		Expect(msg).NotTo(ContainSubstring("Upgrades are blocked"))
		Expect(msg).To(ContainSubstring("machine-config ClusterOperator"))
	})
})

var _ = Describe("The second writer of a hot loop", func() {
	entry := func(manager, fields string, at int) metav1.ManagedFieldsEntry {
		t := metav1.Date(2026, 1, 1, at, 0, 0, 0, time.UTC)
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &t, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	It("is looked for in the field a boot image update writes: a Cluster API owner's template reference", func() {
		owner := &unstructured.Unstructured{}
		owner.SetAPIVersion("cluster.x-k8s.io/v1beta2")
		owner.SetKind("MachineSet")
		owner.SetManagedFields([]metav1.ManagedFieldsEntry{
			entry("labeller", `{"f:metadata":{"f:labels":{}}}`, 3),
			entry("reverter", `{"f:spec":{"f:template":{"f:spec":{"f:infrastructureRef":{"f:name":{}}}}}}`, 2),
			entry(FieldManager, `{"f:spec":{"f:template":{"f:spec":{"f:infrastructureRef":{"f:name":{}}}}}}`, 4),
		})
		field, path := bootImageField(owner)
		Expect(path).To(Equal("spec.template.spec.infrastructureRef.name"))
		Expect(lastOtherWriter(owner, "", field)).To(Equal("reverter"))

		ms := &unstructured.Unstructured{}
		ms.SetAPIVersion("machine.openshift.io/v1beta1")
		ms.SetKind("MachineSet")
		ms.SetManagedFields([]metav1.ManagedFieldsEntry{entry("reverter", `{"f:spec":{"f:template":{"f:spec":{"f:infrastructureRef":{}}}}}`, 2),
			entry("mco", `{"f:spec":{"f:template":{"f:spec":{"f:providerSpec":{}}}}}`, 1)})
		field, _ = bootImageField(ms)
		Expect(lastOtherWriter(ms, "", field)).To(Equal("mco"))
	})
})
