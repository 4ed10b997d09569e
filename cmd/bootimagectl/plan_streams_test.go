package main

import (
	"context"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// cluster50 is a fresh 5.0 AWS cluster: both streams in coreos-bootimages, OSImageStream
// defaulting to rhel-10, and MachineSets of each stream, of a stream the ConfigMap lacks and of a
// region rhel-10 lacks.
func cluster50() []client.Object {
	set := func(name, osStream, region string) *machinev1beta1.MachineSet {
		ms := fixtures.MachineSet(name, fixtures.AWSProviderSpec(region, fixtures.OldAWSAMI))
		if osStream != "" {
			fixtures.Labelled(osStream, &ms.Labels, &ms.Spec.Template.Labels)
		}
		return ms
	}
	cpms := fixtures.ControlPlaneMachineSet(fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI), machinev1.ControlPlaneMachineSetStateActive)
	fixtures.Labelled("rhel-10", &cpms.Labels, &cpms.Spec.Template.OpenShiftMachineV1Beta1Machine.ObjectMeta.Labels)
	return []client.Object{
		fixtures.Infrastructure(configv1.AWSPlatformType),
		fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS}, nil),
		fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
		fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{fixtures.MachineManager(operatorv1.ControlPlaneMachineSets, operatorv1.All, nil)}}),
		fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.OCP50ReleaseVersion),
		fixtures.OSImageStream("rhel-10"), fixtures.Pool("worker", ""), fixtures.Pool("master", ""),
		fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
		set("rhel10", "rhel-10", "us-east-1"), set("rhel9", "rhel-9", "us-east-1"), set("unlabelled", "", "us-east-1"),
		set("centos", "centos-10", "us-east-1"), set("rhel10-west", "rhel-10", "us-west-2"), cpms,
	}
}

var _ = Describe("bootimagectl plan on a 5.0 cluster", func() {
	It("plans each object's own stream, live as from files, and the operator then does it", func() {
		ctx := context.Background()
		env := testenv.StartForSpecs(testenv.Options{})
		kubeconfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
		Expect(fixtures.Create(ctx, env.Client, cluster50()...)).To(Succeed())
		ec2 := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(ec2.Close)
		useEC2(ctx, env, ec2)
		Expect(fixtures.Create(ctx, env.Client, fixtures.AWSCredentialsSecret())).To(Succeed())
		selectAsOperator(ctx, env.Client)

		code, out, stderr := runCLI("plan", "--kubeconfig", kubeconfig, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		live := parsePlan(out)
		files := filepath.Join(GinkgoT().TempDir(), "cluster.yaml")
		writeYAML(files, cluster50()...)
		_, out, stderr = runCLI("plan", "-f", files, "--aws-images", writeAMIs(), "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(parsePlan(out).Items).To(Equal(live.Items))

		byName := map[string]bootimage.Decision{}
		for _, d := range live.Items {
			byName[d.Kind+"/"+d.Name] = d
		}
		Expect(byName).To(And(
			HaveKeyWithValue("MachineSet/rhel10", And(HaveField("Stream", "rhel-10"), HaveField("Action", bootimage.Update), HaveField("Target", fixtures.RHEL10AWSAMIUSEast1))),
			HaveKeyWithValue("MachineSet/rhel9", And(HaveField("Stream", "rhel-9"), HaveField("Action", bootimage.Update), HaveField("Target", fixtures.NewAWSAMIUSEast1))),
			HaveKeyWithValue("MachineSet/unlabelled", And(HaveField("Stream", "rhel-10"), HaveField("Target", fixtures.RHEL10AWSAMIUSEast1))),
			HaveKeyWithValue("MachineSet/centos", And(HaveField("Stream", "centos-10"), HaveField("Reason", bootimage.ReasonOSStreamNotInBootImages))),
			HaveKeyWithValue("MachineSet/rhel10-west", And(HaveField("Stream", "rhel-10"), HaveField("Reason", bootimage.ReasonRegionNotInStream))),
			HaveKeyWithValue("ControlPlaneMachineSet/cluster", And(HaveField("Stream", "rhel-10"), HaveField("Target", fixtures.RHEL10AWSAMIUSEast1))),
		))
		Expect(live.Notes).To(ConsistOf(
			"machineset/centos names OS stream centos-10, which coreos-bootimages does not carry, so it keeps its boot image; its machines join MachineConfigPool worker, which runs rhel-10 (OSImageStream cluster status.defaultStream); make the label and the pool agree",
			"machineset/rhel9 boots OS stream rhel-9, but its machines join MachineConfigPool worker, which runs rhel-10 (OSImageStream cluster status.defaultStream): they boot rhel-9 and then rebase to rhel-10; make the label and the pool agree"))
		_, wide, _ := runCLI("plan", "--kubeconfig", kubeconfig, "-o", "wide")
		Expect(wide).To(MatchRegexp(`KIND\s+NAME\s+PLATFORM\s+ARCH\s+STREAM\s+ACTION`))
		Expect(wide).To(MatchRegexp(`MachineSet\s+centos\s+AWS\s+-\s+centos-10\s+Skip\s+OSStreamNotInBootImages`))
		Expect(strings.Count(wide, "Note: machineset/rhel9 boots OS stream rhel-9")).To(Equal(1))

		operatorDoes(ctx, env, ec2, live.Items)
	})
})
