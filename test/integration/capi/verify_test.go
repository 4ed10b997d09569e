package capi_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// awsAMINotFound is how CAPA reports an instance EC2 refused to launch for its AMI.
const awsAMINotFound = "failed to create AWSMachine instance: failed to run instance: InvalidAMIID.NotFound: The image id '[ami-0bbbbbbbbbbbbbb01]' does not exist"

// awsNoCapacity is a refusal for capacity, which says nothing of the AMI.
const awsNoCapacity = "failed to run instance: InsufficientInstanceCapacity: We currently do not have sufficient m6i.xlarge capacity in the Availability Zone you requested (us-east-1a)."

// Issue 47, the Cluster API half: the Machines cloned from a new template copy verify it, or put
// the owner back on the template it replaced. On a control plane of its own; ordered only to
// share it and one operator; each spec makes its own objects and runs alone.
var _ = Describe("Boot image verification of Cluster API MachineSets and MachineDeployments", Ordered, func() {
	var (
		c       client.Client
		own     *testenv.Env
		mgr     *testenv.Manager
		metrics *prometheus.Registry
	)
	// copyGrace is the grace of unused copies, the period of the sweep and how soon an owner
	// whose copies are kept is taken again.
	copyGrace := 2 * time.Second
	// clk is the operator's clock; nil for the real one.
	var clk clock.PassiveClock
	start := func() {
		GinkgoHelper()
		var err error
		metrics = prometheus.NewRegistry()
		hooks := seams.Hooks{CRDPollInterval: 100 * time.Millisecond, TemplateGCGrace: copyGrace}
		mgr, err = own.StartOperatorWithHooks(hooks, controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, Images: (&awscloud.Static{AMIs: fixtures.AWSImages()}).Clouds(), Metrics: metrics, Clock: clk})
		Expect(err).NotTo(HaveOccurred())
	}
	BeforeAll(func() {
		own = testenv.StartForSpecs(testenv.Options{CAPI: true})
		c = own.Client
		managers := []operatorv1.MachineManager{fixtures.ClusterAPIManager(operatorv1.MachineSets, operatorv1.All), fixtures.ClusterAPIManager(bootimage.MachineDeployments, operatorv1.All)}
		Expect(fixtures.Create(ctx, c, append(fixtures.ClusterAPIOnAWS(managers...),
			fixtures.BootImagesConfigMap(fixtures.Stream(), fixtures.ReleaseVersion))...)).To(Succeed())
		start()
		DeferCleanup(func() { _ = mgr.Stop() })
	})

	getIn := func(obj *unstructured.Unstructured) *unstructured.Unstructured { return stored(c, obj) }
	refOf := func(owner *unstructured.Unstructured) func() string {
		return func() string {
			name, _, _ := unstructured.NestedString(getIn(owner).Object, "spec", "template", "spec", "infrastructureRef", "name")
			return name
		}
	}
	historyOf := func(owner *unstructured.Unstructured) func() bootimage.History {
		return func() bootimage.History {
			h, err := bootimage.HistoryOf(getIn(owner).GetAnnotations())
			Expect(err).NotTo(HaveOccurred())
			return h
		}
	}
	eventsOf := func(name string) func() []string { return func() []string { return eventsIn(c, "MachineSet", name) } }
	exists := func(name string) func() error {
		return func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: testenv.CAPINamespace, Name: name}, template(name))
		}
	}
	// updated creates the MachineSet name on installed, a template with the old AMI, waits for the
	// operator to point it at its copy, checks the change it recorded, and returns it with the
	// copy's name.
	updated := func(name, installed string) (*unstructured.Unstructured, string) {
		GinkgoHelper()
		owner := fixtures.ClusterAPIOwner("MachineSet", name, installed)
		Expect(c.Create(ctx, owner)).To(Succeed())
		Eventually(refOf(owner)).ShouldNot(Equal(installed), func() string { return "its Events: " + strings.Join(eventsOf(name)(), "; ") })
		copied := refOf(owner)()
		Expect(historyOf(owner)()).To(ConsistOf(And(
			HaveField("From", fixtures.OldAWSAMI), HaveField("To", fixtures.NewAWSAMIUSEast1), HaveField("By", bootimage.ByOperator),
			HaveField("Outcome", ""), HaveField("Template", Equal(&bootimage.TemplateChange{From: installed, To: copied})))), "recorded in the patch that moved it")
		return owner, copied
	}
	installed := func(name string) string {
		GinkgoHelper()
		Expect(c.Create(ctx, fixtures.AWSMachineTemplate(name, fixtures.OldAWSAMI))).To(Succeed())
		return name
	}
	// newOwnedMachine creates Machine name with its AWSMachine, both labelled ownerLabels and
	// cloned from template, each with status (nil for none).
	newOwnedMachine := func(name string, ownerLabels map[string]any, template string, machineStatus, infraStatus map[string]any) {
		GinkgoHelper()
		labels := map[string]any{"cluster.x-k8s.io/cluster-name": "demo"}
		for k, v := range ownerLabels {
			labels[k] = v
		}
		infra := fixtures.ClusterAPIObject(`
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSMachine
metadata: {name: ` + name + `}
spec: {instanceType: m6i.xlarge, ami: {id: ami-0aaaaaaaaaaaaaa01}}`)
		infra.Object["metadata"].(map[string]any)["labels"] = labels
		infra.SetAnnotations(map[string]string{clusterapi.ClonedFromNameAnnotation: template})
		machine := fixtures.ClusterAPIObject(`
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata: {name: ` + name + `}
spec:
  clusterName: demo
  bootstrap: {dataSecretName: worker-user-data}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AWSMachine, name: ` + name + `}`)
		machine.Object["metadata"].(map[string]any)["labels"] = labels
		for _, o := range []struct {
			obj    *unstructured.Unstructured
			status map[string]any
		}{{infra, infraStatus}, {machine, machineStatus}} {
			Expect(c.Create(ctx, o.obj)).To(Succeed())
			if o.status != nil {
				o.obj.Object["status"] = o.status
				Expect(c.Status().Update(ctx, o.obj)).To(Succeed())
			}
		}
	}
	// newMachine creates Machine name of MachineSet owner (see newOwnedMachine).
	newMachine := func(name, owner, template string, machineStatus, infraStatus map[string]any) {
		GinkgoHelper()
		newOwnedMachine(name, map[string]any{clusterapi.SetNameLabel: owner}, template, machineStatus, infraStatus)
	}
	launchFailed := func(message string) map[string]any {
		return map[string]any{"failureReason": "CreateError", "failureMessage": message, "conditions": []any{map[string]any{
			"type": "InstanceReady", "status": "False", "severity": "Error", "reason": "InstanceProvisionFailed", "message": message,
			"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)}}}
	}
	joined := func(node string) map[string]any {
		return map[string]any{"phase": "Running", "nodeRef": map[string]any{"name": node}}
	}
	degraded := func() metav1.Condition {
		mc := &operatorv1.MachineConfiguration{}
		Expect(c.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
		if cond := meta.FindStatusCondition(mc.Status.Conditions, "BootImageUpdateDegraded"); cond != nil {
			return *cond
		}
		return metav1.Condition{}
	}
	// restores counts the BootImageRestored Events of MachineSet name, repeats included.
	restores := func(name string) int32 {
		GinkgoHelper()
		events := &corev1.EventList{}
		Expect(c.List(ctx, events, client.InNamespace(testenv.CAPINamespace))).To(Succeed())
		var n int32
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == "BootImageRestored" {
				n += max(e.Count, 1)
			}
		}
		return n
	}
	reconciles := func() (float64, error) { return testenv.Reconciles("clusterapi-machineset") }
	// quiet resyncs every controller and returns the writes to owner until every MachineSet has
	// been taken again.
	quiet := func(owner *unstructured.Unstructured) []testenv.Write {
		GinkgoHelper()
		writes, err := own.WatchWrites(ctx, list("cluster.x-k8s.io/v1beta2", "MachineSet"), client.InNamespace(testenv.CAPINamespace))
		Expect(err).NotTo(HaveOccurred())
		defer writes.Stop()
		owners := list("cluster.x-k8s.io/v1beta2", "MachineSet")
		Expect(c.List(ctx, owners, client.InNamespace(testenv.CAPINamespace))).To(Succeed())
		before, err := reconciles()
		Expect(err).NotTo(HaveOccurred())
		Expect(testenv.Resync(ctx, c)).To(Succeed())
		Eventually(reconciles).Should(BeNumerically(">=", before+float64(len(owners.Items))))
		seen, err := writes.Barrier(ctx, c, getIn(owner))
		Expect(err).NotTo(HaveOccurred())
		return seen
	}

	It("restores the previous template, holds and degrades when a machine fails on the new image, once, across a restart", func() {
		owner, copied := updated("v-fail", installed("v-fail-0a1b2c3d"))

		// A restart in the middle: the record is on the object, not in the process.
		Expect(mgr.Stop()).To(Succeed())
		newMachine("v-fail-1", "v-fail", copied, map[string]any{"phase": "Provisioning"}, launchFailed(awsAMINotFound))
		start()

		Eventually(refOf(owner)).Should(Equal("v-fail-0a1b2c3d"))
		h := historyOf(owner)()
		Expect(h).To(HaveLen(2))
		Expect(h[0]).To(And(HaveField("Outcome", bootimage.Failed), HaveField("Machine", "v-fail-1"), HaveField("Error", awsAMINotFound)))
		Expect(h[1]).To(And(HaveField("By", bootimage.ByRestore), HaveField("From", fixtures.NewAWSAMIUSEast1), HaveField("To", fixtures.OldAWSAMI)))
		hold, held, err := bootimage.HoldOf(getIn(owner).GetAnnotations())
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(BeTrue())
		Expect(hold).To(And(HaveField("Target", fixtures.NewAWSAMIUSEast1), HaveField("Machine", "v-fail-1"), HaveField("Error", awsAMINotFound)))
		Eventually(eventsOf("v-fail")).Should(ContainElements(
			HavePrefix("BootImageRestored: Restored boot image "+fixtures.OldAWSAMI+" after machine v-fail-1 failed on "+fixtures.NewAWSAMIUSEast1+": "+awsAMINotFound),
			HavePrefix("BootImageHeld: ")))
		Expect(eventsOf("v-fail")()).To(ContainElement(ContainSubstring("oc annotate machineset.cluster.x-k8s.io/v-fail -n openshift-cluster-api " + bootimage.HoldAnnotation + "-")))
		Eventually(degraded).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", bootimage.ReasonBootImageRestored),
			HaveField("Message", ContainSubstring("1 restored to the previous boot image and held: MachineSet openshift-cluster-api/v-fail"))))
		Eventually(func() (float64, error) {
			return testenv.Metric(metrics, "bootimage_restores_total", "kind", "MachineSet.cluster.x-k8s.io")
		}).Should(Equal(1.0))

		// Held: neither updated again nor restored twice, by this process or the next.
		Expect(quiet(owner)).To(BeEmpty(), "written while held")
		Expect(mgr.Stop()).To(Succeed())
		start()
		Eventually(degraded).Should(HaveField("Reason", bootimage.ReasonBootImageRestored))
		Expect(quiet(owner)).To(BeEmpty(), "written while held, after a restart")
		Expect(refOf(owner)()).To(Equal("v-fail-0a1b2c3d"))
		Expect(restores("v-fail")).To(Equal(int32(1)), "one restore")
	})

	It("takes a capacity failure as no evidence, and a machine that joins as proof", func() {
		// Without a pass every copyGrace, only the Machines' watch brings the owner back.
		Expect(mgr.Stop()).To(Succeed())
		copyGrace = clusterapi.TemplateGCGrace
		start()
		DeferCleanup(func() {
			Expect(mgr.Stop()).To(Succeed())
			copyGrace = 2 * time.Second
			start()
		})
		owner, copied := updated("v-ok", installed("v-ok-0a1b2c3d"))
		newMachine("v-ok-1", "v-ok", copied, map[string]any{"phase": "Failed"}, launchFailed(awsNoCapacity))
		Expect(quiet(owner)).To(BeEmpty(), "a capacity failure restores nothing")
		Expect(refOf(owner)()).To(Equal(copied))

		newMachine("v-ok-2", "v-ok", copied, joined("ip-10-0-1-2.ec2.internal"), nil)
		Eventually(historyOf(owner)).Should(ConsistOf(And(HaveField("Outcome", bootimage.Verified), HaveField("Machine", "v-ok-2"))))
		Eventually(eventsOf("v-ok")).Should(ContainElement("BootImageVerified: Machine v-ok-2 booted " + fixtures.NewAWSAMIUSEast1 + " and became a node: the new boot image is verified"))
		Expect(refOf(owner)()).To(Equal(copied))
		Expect(getIn(owner).GetAnnotations()).NotTo(HaveKey(bootimage.HoldAnnotation))
		Expect(restores("v-ok")).To(BeZero())
	})

	It("keeps the template a restore needs while the change is pending, and collects it once verified", func() {
		// The owner is on an earlier copy of ours, which nothing names once the owner moves on.
		earlier := fixtures.AWSMachineTemplate("v-gc-aaaaaaaaaa", fixtures.OldAWSAMI)
		earlier.SetLabels(clusterapi.TemplateCopyLabels("MachineSet", "v-gc"))
		earlier.SetAnnotations(map[string]string{clusterapi.TemplateOwnerAnnotation: "MachineSet/v-gc"})
		Expect(c.Create(ctx, earlier)).To(Succeed())
		owner, copied := updated("v-gc", earlier.GetName())

		// The barrier: a copy made later for no owner, which only the sweep collects. Once it is
		// gone, a sweep has seen the earlier copy old enough to go, and kept it.
		barrier := fixtures.AWSMachineTemplate("v-barrier-aaaaaaaaaa", fixtures.OldAWSAMI)
		barrier.SetLabels(clusterapi.TemplateCopyLabels("MachineSet", "v-barrier"))
		barrier.SetAnnotations(map[string]string{clusterapi.TemplateOwnerAnnotation: "MachineSet/v-barrier"})
		Expect(c.Create(ctx, barrier)).To(Succeed())
		Eventually(exists(barrier.GetName())).Should(Satisfy(apierrors.IsNotFound))
		Expect(exists(earlier.GetName())()).To(Succeed(), "kept while a restore can need it")

		newMachine("v-gc-1", "v-gc", copied, joined("ip-10-0-1-3.ec2.internal"), nil)
		Eventually(historyOf(owner)).Should(ConsistOf(HaveField("Outcome", bootimage.Verified)))
		Eventually(exists(earlier.GetName())).Should(Satisfy(apierrors.IsNotFound), "no restore needs it once verified")
		Expect(exists(copied)()).To(Succeed())
	})

	It("restores a MachineDeployment when a Machine of one of its MachineSets fails on the new image", func() {
		md := fixtures.ClusterAPIOwner("MachineDeployment", "v-md", installed("v-md-0a1b2c3d"))
		Expect(c.Create(ctx, md)).To(Succeed())
		md = getIn(md)
		Expect(unstructured.SetNestedField(md.Object, map[string]any{"observedGeneration": md.GetGeneration(), "replicas": int64(2)}, "status")).To(Succeed())
		Expect(c.Status().Update(ctx, md)).To(Succeed())
		Eventually(refOf(md)).ShouldNot(Equal("v-md-0a1b2c3d"))
		copied := refOf(md)()
		Expect(historyOf(md)()).To(ConsistOf(HaveField("Template", Equal(&bootimage.TemplateChange{From: "v-md-0a1b2c3d", To: copied}))))

		newOwnedMachine("v-md-1", map[string]any{clusterapi.DeploymentNameLabel: "v-md", clusterapi.SetNameLabel: "v-md-7c9f8"}, copied,
			map[string]any{"phase": "Failed"}, launchFailed(awsAMINotFound))
		Eventually(refOf(md)).Should(Equal("v-md-0a1b2c3d"))
		Expect(historyOf(md)()).To(HaveExactElements(
			And(HaveField("Outcome", bootimage.Failed), HaveField("Machine", "v-md-1")), HaveField("By", bootimage.ByRestore)))
		Eventually(func() []string { return eventsIn(c, "MachineDeployment", "v-md") }).Should(ContainElement(
			HavePrefix("BootImageRestored: Restored boot image " + fixtures.OldAWSAMI + " after machine v-md-1 failed on " + fixtures.NewAWSAMIUSEast1)))
		Expect(getIn(md).GetAnnotations()).To(HaveKey(bootimage.HoldAnnotation))
	})

	It("restores the previous template when a new machine is no node within the deadline while one on the previous template became one", func() {
		fake := clocktesting.NewFakeClock(time.Now())
		Expect(mgr.Stop()).To(Succeed())
		clk = fake
		start()
		DeferCleanup(func() {
			Expect(mgr.Stop()).To(Succeed())
			clk = nil
			start()
		})
		owner, copied := updated("v-late", installed("v-late-0a1b2c3d"))
		newMachine("v-late-1", "v-late", copied, map[string]any{"phase": "Provisioned"}, nil)
		newMachine("v-late-0", "v-late", "v-late-0a1b2c3d", joined("ip-10-0-3-1.ec2.internal"), nil)
		Expect(quiet(owner)).To(BeEmpty(), "within the deadline: still pending")

		fake.Step(21 * time.Minute)
		Expect(testenv.Resync(ctx, c)).To(Succeed())
		Eventually(refOf(owner)).Should(Equal("v-late-0a1b2c3d"))
		Expect(historyOf(owner)()[0]).To(And(HaveField("Outcome", bootimage.Failed), HaveField("Machine", "v-late-1"),
			HaveField("Error", "did not become a node within 20m0s of its creation, while a machine on "+fixtures.OldAWSAMI+" did")))
		Expect(getIn(owner).GetAnnotations()).To(HaveKey(bootimage.HoldAnnotation))
	})

	// failedUnrestored waits for owner's change to copied to be recorded Failed by machine, with the
	// Warning that says it cannot be undone, and checks that nothing was put back or held.
	failedUnrestored := func(owner *unstructured.Unstructured, machine, ref string) {
		GinkgoHelper()
		Eventually(historyOf(owner)).Should(ConsistOf(And(HaveField("Outcome", bootimage.Failed), HaveField("Machine", machine), HaveField("Error", awsAMINotFound))))
		Eventually(eventsOf(owner.GetName())).Should(ContainElement(And(HavePrefix("BootImageRestored: Machine "+machine+" failed on boot image "+fixtures.NewAWSAMIUSEast1),
			HaveSuffix("and the change from "+fixtures.OldAWSAMI+" cannot be undone: restore it by hand"))))
		Expect(quiet(owner)).To(BeEmpty(), "a failure recorded once, and nothing undone")
		Expect(refOf(owner)()).To(Equal(ref))
		Expect(getIn(owner).GetAnnotations()).NotTo(HaveKey(bootimage.HoldAnnotation))
		Expect(restores(owner.GetName())).To(Equal(int32(1)), "the one Warning")
	}

	It("records a failure it cannot undo, and says so, when the template it replaced was deleted since", func() {
		owner, copied := updated("v-gone", installed("v-gone-0a1b2c3d"))
		Expect(c.Delete(ctx, template("v-gone-0a1b2c3d"))).To(Succeed())
		Eventually(exists("v-gone-0a1b2c3d")).Should(Satisfy(apierrors.IsNotFound))

		newMachine("v-gone-1", "v-gone", copied, map[string]any{"phase": "Provisioning"}, launchFailed(awsAMINotFound))
		failedUnrestored(owner, "v-gone-1", copied)
	})

	It("records a failure it cannot undo, and says so, when someone moved the owner to another template since", func() {
		owner, copied := updated("v-moved", installed("v-moved-0a1b2c3d"))
		// An admin's own template, on the target image: the operator has nothing to update.
		Expect(c.Create(ctx, fixtures.AWSMachineTemplate("v-moved-mine", fixtures.NewAWSAMIUSEast1))).To(Succeed())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live := getIn(owner)
			Expect(unstructured.SetNestedField(live.Object, "v-moved-mine", "spec", "template", "spec", "infrastructureRef", "name")).To(Succeed())
			return c.Update(ctx, live)
		})).To(Succeed())

		newMachine("v-moved-1", "v-moved", copied, map[string]any{"phase": "Provisioning"}, launchFailed(awsAMINotFound))
		failedUnrestored(owner, "v-moved-1", "v-moved-mine")
	})

	// The canaries go last and are deleted after their spec: every spec's target is the same
	// image, and a canary gates every Cluster API owner that goes to it.
	// canaryMoved creates the canary MachineSet name on a template with the old AMI, waits for the
	// operator to point it at its copy, and returns it with the copy's name.
	canaryMoved := func(name string) (*unstructured.Unstructured, string) {
		GinkgoHelper()
		owner := fixtures.ClusterAPIOwner("MachineSet", name, installed(name+"-0a1b2c3d"))
		owner.SetLabels(map[string]string{bootimage.CanaryLabel: "true"})
		Expect(c.Create(ctx, owner)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(c.Delete(ctx, owner))).To(Succeed()) })
		Eventually(refOf(owner)).ShouldNot(Equal(name+"-0a1b2c3d"), func() string { return "its Events: " + strings.Join(eventsOf(name)(), "; ") })
		return owner, refOf(owner)()
	}
	// settledMachineDeployment creates MachineDeployment name on template, its rollout done.
	settledMachineDeployment := func(name, template string) *unstructured.Unstructured {
		GinkgoHelper()
		md := fixtures.ClusterAPIOwner("MachineDeployment", name, template)
		Expect(c.Create(ctx, md)).To(Succeed())
		md = getIn(md)
		Expect(unstructured.SetNestedField(md.Object, map[string]any{"observedGeneration": md.GetGeneration(), "replicas": int64(1)}, "status")).To(Succeed())
		Expect(c.Status().Update(ctx, md)).To(Succeed())
		return md
	}

	It("updates a Cluster API canary first, and the other MachineSets and MachineDeployments once a canary machine has booted the image", func() {
		canary, copied := canaryMoved("c-canary")
		other := fixtures.ClusterAPIOwner("MachineSet", "c-other", installed("c-other-0a1b2c3d"))
		Expect(c.Create(ctx, other)).To(Succeed())
		md := settledMachineDeployment("c-md", installed("c-md-0a1b2c3d"))

		waiting := And(HavePrefix("WaitingForCanary: "), ContainSubstring("keeps "+fixtures.OldAWSAMI+": canary MachineSet c-canary has "+fixtures.NewAWSAMIUSEast1+" and no machine of it has booted it yet"))
		Eventually(eventsOf("c-other")).Should(ContainElement(waiting))
		Eventually(func() []string { return eventsIn(c, "MachineDeployment", "c-md") }).Should(ContainElement(waiting))
		Expect(quiet(other)).To(BeEmpty(), "written while its canary is unproved")
		Expect(refOf(other)()).To(Equal("c-other-0a1b2c3d"))
		Expect(refOf(md)()).To(Equal("c-md-0a1b2c3d"))

		newMachine("c-canary-1", "c-canary", copied, joined("ip-10-0-2-1.ec2.internal"), nil)
		Eventually(historyOf(canary)).Should(ConsistOf(And(HaveField("Outcome", bootimage.Verified), HaveField("Machine", "c-canary-1"))))
		for _, owner := range []*unstructured.Unstructured{other, md} {
			Eventually(refOf(owner)).ShouldNot(HaveSuffix("-0a1b2c3d"), owner.GetKind()+" "+owner.GetName())
			Expect(historyOf(owner)()).To(ConsistOf(And(HaveField("From", fixtures.OldAWSAMI), HaveField("To", fixtures.NewAWSAMIUSEast1))))
		}
	})

	It("restores and holds a Cluster API canary whose machine fails on the image, and keeps the others waiting with its error", func() {
		canary, copied := canaryMoved("c-bad")
		other := fixtures.ClusterAPIOwner("MachineSet", "c-wait", installed("c-wait-0a1b2c3d"))
		Expect(c.Create(ctx, other)).To(Succeed())
		Eventually(eventsOf("c-wait")).Should(ContainElement(HavePrefix("WaitingForCanary: ")))

		newMachine("c-bad-1", "c-bad", copied, map[string]any{"phase": "Provisioning"}, launchFailed(awsAMINotFound))
		Eventually(refOf(canary)).Should(Equal("c-bad-0a1b2c3d"))
		Expect(getIn(canary).GetAnnotations()).To(HaveKey(bootimage.HoldAnnotation))
		Eventually(eventsOf("c-wait")).Should(ContainElement(And(HavePrefix("WaitingForCanary: "),
			ContainSubstring("canary MachineSet c-bad has "+fixtures.NewAWSAMIUSEast1+" and its machine failed on it: machine c-bad-1: "+awsAMINotFound))))
		Expect(quiet(other)).To(BeEmpty(), "written while its canary failed")
		Expect(refOf(other)()).To(Equal("c-wait-0a1b2c3d"))
		Expect(historyOf(other)()).To(BeEmpty())
	})
})
