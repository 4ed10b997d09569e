package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// The operator's Event for a target unavailable in the region, first recorded at first.
func unavailableEvent(name, target string, first time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: fixtures.MachineAPINamespace, Name: name + ".unavailable"},
		InvolvedObject: corev1.ObjectReference{Kind: bootimage.KindMachineSet, Namespace: fixtures.MachineAPINamespace, Name: name},
		Reason:         bootimage.ReasonTargetImageUnavailable, Type: corev1.EventTypeNormal,
		Message:        "Boot image update skipped: AMI " + target + " not found in us-east-1",
		FirstTimestamp: metav1.NewTime(first), LastTimestamp: metav1.NewTime(first), Count: 1,
		Source: corev1.EventSource{Component: "bootimage-operator"},
	}
}

// Ordered for its BeforeAll: an API server and a fake EC2 of its own, seeded once with the
// MachineSets whose stream target EC2 lacks, which its one spec plans.
var _ = Describe("bootimagectl plan after the cloud grace period", Ordered, func() {
	ctx := context.Background()
	var env *testenv.Env
	var kubeconfig, amis string
	BeforeAll(func() {
		env = testenv.StartForSpecs(testenv.Options{})
		kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
		Expect(fixtures.Create(ctx, env.Client, append(planCluster(),
			fixtures.MachineSet("fresh", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
			fixtures.MachineSet("lasting", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))...)).To(Succeed())
		// The stream's us-east-1 target is not available in the region yet (an AMI missing from
		// the file is an error of the file, not of EC2).
		images := fixtures.AWSImages()
		for i := range images {
			if images[i].ImageID == fixtures.NewAWSAMIUSEast1 {
				images[i].State = "pending"
			}
		}
		amis = filepath.Join(GinkgoT().TempDir(), "amis.json")
		data, err := json.Marshal(images)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(amis, data, 0o600)).To(Succeed())
	})

	It("says Error TargetImageUnavailable where the operator first said Skip more than 3 minutes ago, and exits non-zero", func() {
		Expect(env.Client.Create(ctx, unavailableEvent("fresh", fixtures.NewAWSAMIUSEast1, time.Now().Add(-time.Minute)))).To(Succeed())
		Expect(env.Client.Create(ctx, unavailableEvent("lasting", fixtures.NewAWSAMIUSEast1, time.Now().Add(-bootimage.CloudErrorGrace-time.Minute)))).To(Succeed())
		code, out, _ := runCLI("plan", "--kubeconfig", kubeconfig, "--aws-images", amis, "-o", "json")
		p := parsePlan(out)
		byName := map[string]bootimage.Decision{}
		for _, d := range p.Items {
			byName[d.Name] = d
		}
		Expect(byName["fresh"]).To(And(HaveField("Action", bootimage.Skip), HaveField("Reason", bootimage.ReasonTargetImageUnavailable)), "within the grace period")
		Expect(byName["lasting"]).To(And(HaveField("Action", bootimage.Error), HaveField("Reason", bootimage.ReasonTargetImageUnavailable),
			HaveField("Message", ContainSubstring("for more than 3m0s"))))
		Expect(p.Summary.Error).To(BeNumerically(">=", 1))
		Expect(code).NotTo(Equal(0), "the operator degrades: the plan says so by its exit code")
	})
})
