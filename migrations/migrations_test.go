package migrations_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/migrations"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

func TestMigrations(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "migrations")
}

var (
	cpmsOn  = fg.New(fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS}, nil)
	cpmsOff = fg.New(fixtures.ReleaseVersion, nil, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS})
	capiOn  = fg.New(fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS, fg.ManagedBootImagesAWSCAPI}, nil)
)

func manager(res operatorv1.MachineManagerMachineSetsResourceType, mode operatorv1.MachineManagerSelectorMode) operatorv1.MachineManager {
	m := operatorv1.MachineManager{Resource: res, APIGroup: operatorv1.MachineAPI, Selection: operatorv1.MachineManagerSelector{Mode: mode}}
	if mode == operatorv1.Partial {
		m.Selection.Partial = &operatorv1.PartialSelector{MachineResourceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "infra"}}}
	}
	return m
}

// none is the entry the migration writes for res, as JSON decodes it.
func none(res operatorv1.MachineManagerMachineSetsResourceType) map[string]any {
	return noneIn(res, string(operatorv1.MachineAPI))
}

func noneIn(res operatorv1.MachineManagerMachineSetsResourceType, group string) map[string]any {
	return map[string]any{"resource": string(res), "apiGroup": group, "selection": map[string]any{"mode": string(operatorv1.None)}}
}

var _ = DescribeTable("EmptyMachineManagers plans",
	func(managers []operatorv1.MachineManager, platform configv1.PlatformType, gates fg.Gates, want []map[string]any) {
		mc := &operatorv1.MachineConfiguration{Spec: operatorv1.MachineConfigurationSpec{ManagedBootImages: operatorv1.ManagedBootImages{MachineManagers: managers}}}
		patch, message := migrations.EmptyMachineManagers.Plan(mc, migrations.Cluster{Platform: platform, Gates: gates})
		if want == nil {
			Expect(patch).To(BeNil())
			Expect(message).To(BeEmpty())
			return
		}
		// Compare as the API server will read it.
		raw, err := json.Marshal(patch)
		Expect(err).NotTo(HaveOccurred())
		var got map[string]any
		Expect(json.Unmarshal(raw, &got)).To(Succeed())
		wantEntries := make([]any, len(want))
		for i, w := range want {
			wantEntries[i] = w
		}
		Expect(got).To(Equal(map[string]any{"managedBootImages": map[string]any{"machineManagers": wantEntries}}), "only spec.managedBootImages.machineManagers is written")
		Expect(message).To(HavePrefix("Replaced the legacy opt-out spec.managedBootImages.machineManagers: [] with explicit selection mode None for"))
	},
	// The legacy opt-out: every supported resource, MachineSets always.
	Entry("empty list, AWS, CPMS gate on: both None", []operatorv1.MachineManager{}, configv1.AWSPlatformType, cpmsOn,
		[]map[string]any{none(operatorv1.MachineSets), none(operatorv1.ControlPlaneMachineSets)}),
	Entry("empty list, AWS, CPMS gate off: MachineSets None", []operatorv1.MachineManager{}, configv1.AWSPlatformType, cpmsOff,
		[]map[string]any{none(operatorv1.MachineSets)}),
	Entry("empty list, GCP, CPMS gate on: both None", []operatorv1.MachineManager{}, configv1.GCPPlatformType, cpmsOn,
		[]map[string]any{none(operatorv1.MachineSets), none(operatorv1.ControlPlaneMachineSets)}),
	Entry("empty list, vSphere: no CPMS support, MachineSets None", []operatorv1.MachineManager{}, configv1.VSpherePlatformType, cpmsOn,
		[]map[string]any{none(operatorv1.MachineSets)}),
	Entry("empty list, BareMetal: nothing supported, MachineSets None all the same", []operatorv1.MachineManager{}, configv1.BareMetalPlatformType, cpmsOn,
		[]map[string]any{none(operatorv1.MachineSets)}),
	Entry("empty list, platform unknown: MachineSets None", []operatorv1.MachineManager{}, configv1.PlatformType(""), cpmsOn,
		[]map[string]any{none(operatorv1.MachineSets)}),
	Entry("empty list, AWS, Cluster API gate on: the Cluster API entries None too", []operatorv1.MachineManager{}, configv1.AWSPlatformType, capiOn,
		[]map[string]any{none(operatorv1.MachineSets), none(operatorv1.ControlPlaneMachineSets),
			noneIn(operatorv1.MachineSets, "cluster.x-k8s.io"), noneIn("machinedeployments", "cluster.x-k8s.io")}),
	Entry("empty list, vSphere, Cluster API gate on: written on every platform, like MachineSets", []operatorv1.MachineManager{}, configv1.VSpherePlatformType, capiOn,
		[]map[string]any{none(operatorv1.MachineSets), noneIn(operatorv1.MachineSets, "cluster.x-k8s.io"), noneIn("machinedeployments", "cluster.x-k8s.io")}),
	// Anything else is the user's and is left alone.
	Entry("absent list: no opinion, nothing to do", nil, configv1.AWSPlatformType, cpmsOn, nil),
	Entry("MachineSets None", []operatorv1.MachineManager{manager(operatorv1.MachineSets, operatorv1.None)}, configv1.AWSPlatformType, cpmsOn, nil),
	Entry("MachineSets All", []operatorv1.MachineManager{manager(operatorv1.MachineSets, operatorv1.All)}, configv1.AWSPlatformType, cpmsOn, nil),
	Entry("MachineSets Partial", []operatorv1.MachineManager{manager(operatorv1.MachineSets, operatorv1.Partial)}, configv1.GCPPlatformType, cpmsOn, nil),
	Entry("only a CPMS entry", []operatorv1.MachineManager{manager(operatorv1.ControlPlaneMachineSets, operatorv1.All)}, configv1.AWSPlatformType, cpmsOn, nil),
	Entry("both entries", []operatorv1.MachineManager{manager(operatorv1.MachineSets, operatorv1.All), manager(operatorv1.ControlPlaneMachineSets, operatorv1.None)},
		configv1.AzurePlatformType, cpmsOn, nil),
	Entry("a CPMS entry with the gate off", []operatorv1.MachineManager{manager(operatorv1.ControlPlaneMachineSets, operatorv1.All)}, configv1.AWSPlatformType, cpmsOff, nil),
)

// The Runner on a real API server: its merge patch, its optimistic lock and its record.
// Ordered for its BeforeAll: one API server for the specs, started once; each spec makes its own
// MachineConfiguration/cluster and the AfterEach deletes it, so their order does not matter.
var _ = Describe("Runner", Ordered, func() {
	var (
		env *testenv.Env
		k8s client.Client
		ctx = context.Background()
	)
	BeforeAll(func() {
		env = testenv.StartForSpecs(testenv.Options{})
		k8s = env.Client
	})
	AfterEach(func() {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}))).To(Succeed())
	})

	runner := func(before func(context.Context, string) error) (migrations.Runner, *record.FakeRecorder) {
		recorder := record.NewFakeRecorder(10)
		return migrations.Runner{Client: k8s, Reader: k8s, Recorder: recorder, Migrations: migrations.All, BeforeWrite: before}, recorder
	}
	get := func() *operatorv1.MachineConfiguration {
		mc := &operatorv1.MachineConfiguration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
		return mc
	}
	cluster := migrations.Cluster{Platform: configv1.AWSPlatformType, Gates: cpmsOn}

	It("writes the explicit opt-out and its record once, keeping the rest of the spec", func() {
		mc := fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{}})
		mc.Spec.LogLevel = operatorv1.Debug
		Expect(fixtures.Create(ctx, k8s, mc)).To(Succeed())
		r, recorder := runner(nil)

		mc = get()
		wrote, err := r.Run(ctx, mc, cluster)
		Expect(err).NotTo(HaveOccurred())
		Expect(wrote).To(BeTrue())
		stored := get()
		Expect(stored.Spec.ManagedBootImages.MachineManagers).To(Equal([]operatorv1.MachineManager{
			manager(operatorv1.MachineSets, operatorv1.None), manager(operatorv1.ControlPlaneMachineSets, operatorv1.None)}))
		Expect(stored.Spec.LogLevel).To(Equal(operatorv1.Debug))
		Expect(stored.Annotations).To(HaveKey(migrations.AnnotationPrefix + migrations.EmptyMachineManagers.Name))
		Expect(recorder.Events).To(Receive(ContainSubstring(migrations.ReasonMigrated)))

		wrote, err = r.Run(ctx, stored, cluster)
		Expect(err).NotTo(HaveOccurred())
		Expect(wrote).To(BeFalse(), "a second run has nothing to do")
		Expect(get().ResourceVersion).To(Equal(stored.ResourceVersion))
	})

	It("writes the Cluster API entries while their gate is on, and the TechPreview CRD takes them", func() {
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{}}))).To(Succeed())
		r, _ := runner(nil)

		wrote, err := r.Run(ctx, get(), migrations.Cluster{Platform: configv1.AWSPlatformType, Gates: capiOn})
		Expect(err).NotTo(HaveOccurred())
		Expect(wrote).To(BeTrue())
		capi := func(res operatorv1.MachineManagerMachineSetsResourceType) operatorv1.MachineManager {
			m := manager(res, operatorv1.None)
			m.APIGroup = "cluster.x-k8s.io"
			return m
		}
		Expect(get().Spec.ManagedBootImages.MachineManagers).To(Equal([]operatorv1.MachineManager{
			manager(operatorv1.MachineSets, operatorv1.None), manager(operatorv1.ControlPlaneMachineSets, operatorv1.None),
			capi(operatorv1.MachineSets), capi("machinedeployments")}))
	})

	It("decides again on a user's concurrent edit, which wins", func() {
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{}}))).To(Succeed())
		userChoice := []operatorv1.MachineManager{manager(operatorv1.MachineSets, operatorv1.All)}
		raced := false
		r, recorder := runner(func(context.Context, string) error {
			if !raced {
				raced = true
				// A merge patch, as kubectl sends: a typed update would send zero values the CRD refuses.
				patch := []byte(`{"spec":{"managedBootImages":{"machineManagers":[{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"All"}}]}}}`)
				Expect(k8s.Patch(ctx, get(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
			}
			return nil
		})

		wrote, err := r.Run(ctx, get(), cluster)
		Expect(err).NotTo(HaveOccurred())
		Expect(raced).To(BeTrue())
		Expect(wrote).To(BeFalse())
		stored := get()
		Expect(stored.Spec.ManagedBootImages.MachineManagers).To(Equal(userChoice))
		Expect(stored.Annotations).NotTo(HaveKey(migrations.AnnotationPrefix + migrations.EmptyMachineManagers.Name))
		Expect(recorder.Events).NotTo(Receive())
	})
})
