package bootimage

import (
	"context"
	"fmt"
	"slices"

	"github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
)

// toy is a platform written the way a real one is (a folder of bootimage/ holds one): this and the one line in the
// BeforeEach below are all it takes to add one. Its boot image is the string at "image".
type toy struct{ target string }

const toyPlatform configv1.PlatformType = "Toy"

func (toy) Traits() PlatformTraits {
	return PlatformTraits{Type: toyPlatform, Arches: []string{"x86_64"}, TemplateKind: "ToyMachineTemplate"}
}

func (toy) Current(spec MachineSpec) string {
	var image string
	_ = spec.Field("image", &image)
	return image
}

func (t toy) Decide(_ context.Context, d Decision, in PlatformInput) (Decision, error) {
	d.Current = t.Current(in.Spec)
	if d.Current == "" {
		return d.With(Error, ReasonInvalidProviderSpec, "providerSpec: image is missing or not a string"), nil
	}
	d.Target = fmt.Sprintf("%s-%s", t.target, in.Arch)
	if d.Current == d.Target {
		return d.With(NoChange, ReasonUpToDate, "image %s is the stream's", d.Current), nil
	}
	d.ProviderSpecPatch = []PatchOp{Set("/image", d.Target)}
	return d.With(Update, ReasonImageOutdated, "image %s is outdated: the stream's is %s", d.Current, d.Target), nil
}

type toyGates struct{}

func (toyGates) Enabled(configv1.FeatureGateName) bool { return true }

var _ = ginkgo.Describe("A platform added by one file and one line", func() {
	ginkgo.BeforeEach(func() {
		platforms[toyPlatform] = toy{target: "toy-v2"}
		ginkgo.DeferCleanup(func() { delete(platforms, toyPlatform) })
	})

	cluster := func() Cluster {
		return Cluster{
			Platform: toyPlatform, Gates: toyGates{}, Stable: true, ControlPlaneArch: "amd64",
			Effective:  EffectiveConfiguration(operatorv1.ManagedBootImages{}, toyPlatform, toyGates{}).Status,
			BootImages: &corev1.ConfigMap{Data: map[string]string{"stream": `{"stream": "rhcos-9", "architectures": {"x86_64": {"artifacts": {}}, "s390x": {"artifacts": {}}}}`}},
		}
	}
	machineSet := func(providerSpec string, annotations map[string]string) Object {
		return Object{Kind: KindMachineSet, Namespace: "openshift-machine-api", Name: "worker-a", Resource: operatorv1.MachineSets,
			Annotations: annotations, ProviderSpec: []byte(providerSpec)}
	}

	ginkgo.It("is managed, read, decided and patched through the dispatcher", func() {
		Expect(SupportedResources(toyPlatform, toyGates{})).To(Equal([]operatorv1.MachineManagerMachineSetsResourceType{operatorv1.MachineSets}))
		providerSpec := `{"image": "toy-v1", "size": "large"}`
		Expect(CurrentImage(toyPlatform, Object{ProviderSpec: []byte(providerSpec)})).To(Equal("toy-v1"))

		d, err := Decide(context.Background(), cluster(), machineSet(providerSpec, nil))
		Expect(err).NotTo(HaveOccurred())
		Expect(d).To(And(HaveField("Action", Update), HaveField("Reason", ReasonImageOutdated), HaveField("Platform", "Toy"),
			HaveField("Arch", "amd64"), HaveField("Current", "toy-v1"), HaveField("Target", "toy-v2-x86_64")))
		patch, err := d.JSONPatch("/spec/template/spec/providerSpec/value", "42")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(patch)).To(MatchJSON(`[{"op": "add", "path": "/metadata/resourceVersion", "value": "42"},
			{"op": "add", "path": "/spec/template/spec/providerSpec/value/image", "value": "toy-v2-x86_64"}]`))
	})

	ginkgo.It("is NoChange on the target, and gets the shared checks before its own", func() {
		d, err := Decide(context.Background(), cluster(), machineSet(`{"image": "toy-v2-x86_64"}`, nil))
		Expect(err).NotTo(HaveOccurred())
		Expect(d).To(And(HaveField("Action", NoChange), HaveField("Reason", ReasonUpToDate)))

		d, err = Decide(context.Background(), cluster(), machineSet(`{"image": "toy-v1"}`, map[string]string{ArchAnnotation: "kubernetes.io/arch=s390x"}))
		Expect(err).NotTo(HaveOccurred())
		Expect(d).To(And(HaveField("Action", Skip), HaveField("Reason", ReasonUnsupportedArchitecture), HaveField("Message", "Toy has no s390x boot images")))
	})

	ginkgo.It("decides a Cluster API template with the same code", func() {
		c := cluster()
		// The Cluster API MachineSets opted in (the effective configuration has them None by default).
		c.Effective.MachineManagers = append(slices.DeleteFunc(c.Effective.MachineManagers, func(m operatorv1.MachineManager) bool { return m.APIGroup == ClusterAPIGroup }),
			operatorv1.MachineManager{Resource: operatorv1.MachineSets, APIGroup: ClusterAPIGroup, Selection: operatorv1.MachineManagerSelector{Mode: operatorv1.All}})
		// As bootimage/clusterapi.ObjectOf reduces a MachineSet naming a ToyMachineTemplate.
		obj := Object{Kind: KindMachineSet, Namespace: ClusterAPINamespace, Name: "worker-a", APIGroup: ClusterAPIGroup, Resource: operatorv1.MachineSets,
			TemplateKind: "ToyMachineTemplate", ProviderSpec: []byte(`{"image": "toy-v1", "size": "large"}`)}

		d, err := Decide(context.Background(), c, obj)
		Expect(err).NotTo(HaveOccurred())
		Expect(d).To(And(HaveField("Action", Update), HaveField("Current", "toy-v1"), HaveField("Target", "toy-v2-x86_64")), d.Reason+": "+d.Message)
		Expect(d.ProviderSpecPatch).To(ConsistOf(HaveField("Value", "toy-v2-x86_64")), "only the image changes")
	})
})
