package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// The specs share one cluster and build on each other: the objects of the file specs, then no
// credentials, then a selection in status, then the cloud's endpoint and credentials.
// Ordered: the specs share one cluster and follow it in time: first no status (the selection is
// not the operator's yet), then a status written, then the operator running on it.
var _ = Describe("bootimagectl plan on a cluster", Ordered, func() {
	ctx := context.Background()
	var env *testenv.Env
	var kubeconfig string
	BeforeAll(func() {
		env = testenv.StartForSpecs(testenv.Options{})
		kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
		Expect(fixtures.Create(ctx, env.Client, append(planCluster(), planMachineSets()...)...)).To(Succeed())
	})
	notComputed := "MachineConfiguration/cluster status is not computed for generation 1 yet (observed 0)"
	noCredentials := "No Secret openshift-machine-api/aws-cloud-credentials: AMIs cannot be looked up in EC2"

	It("reads the cluster and decides as it does for the same objects in files, saying the selection is not the operator's yet", func() {
		dir := GinkgoT().TempDir()
		writeYAML(filepath.Join(dir, "objects.yaml"), append(planCluster(), planMachineSets()...)...)
		images := writeAMIs()

		code, out, stderr := runCLI("plan", "--kubeconfig", kubeconfig, "--aws-images", images, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		fromCluster := parsePlan(out)
		_, out, _ = runCLI("plan", "-f", filepath.Join(dir, "objects.yaml"), "--aws-images", images, "-o", "json")
		fromFiles := parsePlan(out)
		Expect(fromCluster.Items).To(Equal(fromFiles.Items))
		Expect(fromCluster.Summary.Update).To(Equal(2))
		Expect(fromCluster.Notes).To(ConsistOf(HavePrefix(notComputed)))
		Expect(fromFiles.Notes).To(BeEmpty())
	})

	It("says once, naming the Secret, that there are no AWS credentials", func() {
		code, out, stderr := runCLI("plan", "--kubeconfig", kubeconfig, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		p := parsePlan(out)
		Expect(p.Notes).To(ConsistOf(HavePrefix(noCredentials), HavePrefix(notComputed)))
		Expect(p.Items).To(HaveEach(HaveField("Reason", BeElementOf(bootimage.ReasonCustomImage, bootimage.ReasonOwnedByController, bootimage.ReasonUpToDate))))

		_, table, _ := runCLI("plan", "--kubeconfig", kubeconfig)
		Expect(strings.Count(table, "aws-cloud-credentials")).To(Equal(1), table)
		Expect(table).To(ContainSubstring("\nNote: " + noCredentials))
	})

	It("with --offline reaches no cloud, and says so", func() {
		_, out, _ := runCLI("plan", "--kubeconfig", kubeconfig, "--offline", "-o", "json")
		Expect(parsePlan(out).Notes).To(ConsistOf(HavePrefix("No AMI catalogue"), HavePrefix(notComputed)))
	})

	It("decides by the selection in MachineConfiguration status, as the operator does", func() {
		setSelection(ctx, env.Client, operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{
			fixtures.MachineManager(operatorv1.MachineSets, operatorv1.None, nil),
			fixtures.MachineManager(operatorv1.ControlPlaneMachineSets, operatorv1.All, nil),
		}})
		code, out, stderr := runCLI("plan", "--kubeconfig", kubeconfig, "--aws-images", writeAMIs(), "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		p := parsePlan(out)
		Expect(p.Notes).To(BeEmpty())
		// The spec leaves MachineSets to the platform default, All: only the status opts them out.
		Expect(p.Items).To(ConsistOf(
			And(HaveField("Kind", "ControlPlaneMachineSet"), HaveField("Reason", bootimage.ReasonImageOutdated)),
			HaveField("Reason", bootimage.ReasonNotSelected), HaveField("Reason", bootimage.ReasonNotSelected),
			HaveField("Reason", bootimage.ReasonNotSelected), HaveField("Reason", bootimage.ReasonNotSelected),
		))
	})

	It("plans, through the cluster's EC2 endpoint and credentials, what the operator then does", func() {
		// south's AMI is RHCOS in its region, which the stream does not list.
		ec2 := fakecloud.NewEC2(append(fixtures.AWSImages(), aws.Image{ImageID: fixtures.OldAWSAMI, OwnerID: aws.RHCOSOwner, Region: "ap-south-1", State: "available"}))
		DeferCleanup(ec2.Close)
		useEC2(ctx, env, ec2)
		arm := fixtures.MachineSet("arm", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
		arm.Annotations[bootimage.ArchAnnotation] = "kubernetes.io/arch=arm64"
		Expect(fixtures.Create(ctx, env.Client,
			fixtures.AWSCredentialsSecret(),
			arm,
			fixtures.MachineSet("west", fixtures.AWSProviderSpec("us-west-2", fixtures.OldAWSAMI)),
			fixtures.MachineSet("south", fixtures.AWSProviderSpec("ap-south-1", fixtures.OldAWSAMI)),
			fixtures.MachineSet("marketplace", fixtures.AWSProviderSpec("us-east-1", fixtures.OldMarketplaceAMI)),
		)).To(Succeed())
		selectAsOperator(ctx, env.Client)

		code, out, stderr := runCLI("plan", "--kubeconfig", kubeconfig, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		p := parsePlan(out)
		Expect(p.Notes).To(BeEmpty())
		Expect(ec2.Calls.Load()).To(BeNumerically(">", 0))
		// Not a plan of skips that would match an idle controllers.
		Expect(p.Summary.Update).To(BeNumerically(">=", 4), out)
		operatorDoes(ctx, env, ec2, p.Items)
	})
})

// operatorDoes starts the operator on env and expects it to do what the plan items say.
func operatorDoes(ctx context.Context, env *testenv.Env, ec2 *fakecloud.EC2, items []bootimage.Decision) {
	GinkgoHelper()
	planned := plannedOutcomes(items)
	mgr, err := env.StartOperator(controllers.Options{CloudRootCAs: ec2.RootCAs()})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(mgr.Stop)
	seen := func() []outcome { return observedOutcomes(ctx, env.Client) }
	Eventually(seen).Should(Equal(planned))
	// An object the plan leaves unchanged shows nothing, so wait until the operator has
	// decided every MachineSet before the last comparison.
	Eventually(func() metav1.ConditionStatus {
		mc := &operatorv1.MachineConfiguration{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
		if c := meta.FindStatusCondition(mc.Status.Conditions, status.ConditionBootImageUpdateProgressing); c != nil {
			return c.Status
		}
		return metav1.ConditionUnknown
	}).Should(Equal(metav1.ConditionFalse))
	Expect(seen()).To(Equal(planned))
}

func parsePlan(out string) Plan {
	GinkgoHelper()
	var p Plan
	Expect(json.Unmarshal([]byte(out), &p)).To(Succeed(), out)
	return p
}

// selectAsOperator writes the selection the operator computes from MachineConfiguration/cluster's
// spec on AWS with gate ManagedBootImagesCPMS, as it would write it.
func selectAsOperator(ctx context.Context, c client.Client) {
	GinkgoHelper()
	mc := &operatorv1.MachineConfiguration{}
	Expect(c.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
	gates := fg.New(fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS}, nil)
	setSelection(ctx, c, bootimage.EffectiveConfiguration(mc.Spec.ManagedBootImages, configv1.AWSPlatformType, gates).Status)
}

// setSelection writes status.managedBootImagesStatus of MachineConfiguration/cluster, computed for
// its generation, as the operator writes it.
func setSelection(ctx context.Context, c client.Client, selection operatorv1.ManagedBootImages) {
	GinkgoHelper()
	mc := &operatorv1.MachineConfiguration{}
	Expect(c.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
	status, err := json.Marshal(selection)
	Expect(err).NotTo(HaveOccurred())
	patch := fmt.Sprintf(`{"status":{"observedGeneration":%d,"managedBootImagesStatus":%s}}`, mc.Generation, status)
	Expect(c.Status().Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// outcome is a decision as it shows on the cluster: for Update and NoChange, the image the object
// carries then (the target); for Skip and Error, the Event's message, which names the target
// where there is one.
type outcome struct {
	Kind, Name, Action, Reason, Image, Message string
}

func plannedOutcomes(items []bootimage.Decision) []outcome {
	out := make([]outcome, 0, len(items))
	for _, d := range items {
		o := outcome{Kind: d.Kind, Name: d.Name, Action: string(d.Action), Reason: d.Reason}
		switch d.Action {
		case bootimage.Update, bootimage.NoChange:
			o.Image = d.Target
		default:
			o.Message = d.Message
		}
		out = append(out, o)
	}
	return out
}

// observedOutcomes reads what the operator did to each MachineSet and the CPMS: patched the image
// and recorded BootImageUpdated; recorded the reason of a skip (Normal) or error (Warning); or
// nothing, which is no change. Sorted as a plan's items.
func observedOutcomes(ctx context.Context, c client.Client) []outcome {
	GinkgoHelper()
	events := &corev1.EventList{}
	Expect(c.List(ctx, events, client.InNamespace(kube.MachineAPINamespace))).To(Succeed())
	sets := &machinev1beta1.MachineSetList{}
	Expect(c.List(ctx, sets, client.InNamespace(kube.MachineAPINamespace))).To(Succeed())
	cpms := &machinev1.ControlPlaneMachineSetList{}
	Expect(c.List(ctx, cpms, client.InNamespace(kube.MachineAPINamespace))).To(Succeed())

	var out []outcome
	observe := func(kind, name string, providerSpec *runtime.RawExtension) {
		o := outcome{Kind: kind, Name: name, Action: string(bootimage.NoChange), Reason: bootimage.ReasonUpToDate, Image: amiOf(providerSpec)}
		var last *corev1.Event
		for i, e := range events.Items {
			// An OS stream disagreement is said beside the decision (the plan's notes), not as one.
			if e.Reason == bootimage.ReasonOSStreamMismatch {
				continue
			}
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && (last == nil || e.LastTimestamp.After(last.LastTimestamp.Time)) {
				last = &events.Items[i]
			}
		}
		switch {
		case last == nil:
		case last.Reason == "BootImageUpdated": // the Event of an update written
			o.Action, o.Reason = string(bootimage.Update), bootimage.ReasonImageOutdated
		default:
			o.Action, o.Reason, o.Image = string(bootimage.Skip), last.Reason, ""
			if last.Type == corev1.EventTypeWarning {
				o.Action = string(bootimage.Error)
			}
			// "Boot image update skipped: <the decision's message>"
			_, o.Message, _ = strings.Cut(last.Message, ": ")
		}
		out = append(out, o)
	}
	for _, ms := range sets.Items {
		observe("MachineSet", ms.Name, ms.Spec.Template.Spec.ProviderSpec.Value)
	}
	for _, c := range cpms.Items {
		observe("ControlPlaneMachineSet", c.Name, c.Spec.Template.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind+"/"+out[i].Name < out[j].Kind+"/"+out[j].Name })
	return out
}

func amiOf(providerSpec *runtime.RawExtension) string {
	GinkgoHelper()
	var ps struct {
		AMI struct {
			ID string `json:"id"`
		} `json:"ami"`
	}
	Expect(json.Unmarshal(providerSpec.Raw, &ps)).To(Succeed())
	return ps.AMI.ID
}
