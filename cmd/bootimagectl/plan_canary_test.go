package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

var _ = Describe("bootimagectl plan with canaries", func() {
	var dir, images string
	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		writeYAML(filepath.Join(dir, "cluster.yaml"), capiCluster(fg.ManagedBootImagesAWSCAPI)...)
		Expect(os.WriteFile(filepath.Join(dir, "capi.yaml"), []byte(capiObjects()), 0o600)).To(Succeed())
		images = writeAMIs()
	})
	// canaryOwner writes a Cluster API MachineSet labelled canary on the old AMI, with history h.
	canaryOwner := func(name string, h bootimage.History) {
		GinkgoHelper()
		o := fixtures.ClusterAPIOwner(bootimage.KindMachineSet, name, "w-1a-old")
		o.SetGeneration(1)
		o.SetLabels(map[string]string{bootimage.CanaryLabel: "true"})
		if h != nil {
			raw, err := json.Marshal(h)
			Expect(err).NotTo(HaveOccurred())
			o.SetAnnotations(map[string]string{bootimage.HistoryAnnotation: string(raw)})
		}
		data, err := yaml.Marshal(o.Object)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(data), 0o600)).To(Succeed())
	}
	// machineSets writes Machine API MachineSets on the old AMI, the canary labelled.
	machineSets := func(canary, other string) {
		GinkgoHelper()
		c := fixtures.MachineSet(canary, fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
		c.Labels[bootimage.CanaryLabel] = "true"
		writeYAML(filepath.Join(dir, "machinesets.yaml"), c, fixtures.MachineSet(other, fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))
	}
	plan := func() Plan {
		GinkgoHelper()
		code, out, stderr := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0), out)
		return parsePlan(out)
	}
	item := func(group, name string, action bootimage.Action, reason string) OmegaMatcher {
		return And(HaveField("APIGroup", group), HaveField("Name", name), HaveField("Action", action), HaveField("Reason", reason))
	}
	waiting := func(group, name, canary string) OmegaMatcher {
		return And(item(group, name, bootimage.Skip, bootimage.ReasonWaitingForCanary),
			HaveField("Message", ContainSubstring("canary "+canary+" has "+fixtures.NewAWSAMIUSEast1)))
	}

	It("updates the canaries first, and keeps the others of each API family waiting for that family's canary, as the operator does", func() {
		canaryOwner("capi-canary", nil)
		machineSets("mapi-canary", "mapi-other")
		p := plan()
		Expect(p.Items).To(ContainElements(
			item("cluster.x-k8s.io", "capi-canary", bootimage.Update, bootimage.ReasonImageOutdated),
			waiting("cluster.x-k8s.io", "capi-only", "MachineSet capi-canary"),
			waiting("cluster.x-k8s.io", "md", "MachineSet capi-canary"),
			item("", "mapi-canary", bootimage.Update, bootimage.ReasonImageOutdated),
			waiting("", "mapi-other", "mapi-canary"),
		))
	})

	It("updates the others once a machine of a canary booted the target, and says a canary's failure", func() {
		at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		moved := clusterapi.TemplateMove(bootimage.Decision{Current: fixtures.OldAWSAMI, Target: fixtures.NewAWSAMIUSEast1}, "w-1a-old", "capi-canary-0123456789", at)
		moved.Outcome, moved.Machine = bootimage.Verified, "capi-canary-1"
		canaryOwner("capi-canary", bootimage.History{moved})
		Expect(plan().Items).To(ContainElements(
			item("cluster.x-k8s.io", "capi-only", bootimage.Update, bootimage.ReasonImageOutdated),
			item("cluster.x-k8s.io", "md", bootimage.Update, bootimage.ReasonImageOutdated),
		))

		moved.Outcome, moved.Error = bootimage.Failed, "InvalidAMIID.NotFound"
		canaryOwner("capi-canary", bootimage.History{moved, {From: fixtures.NewAWSAMIUSEast1, To: fixtures.OldAWSAMI, At: at, By: bootimage.ByRestore}})
		Expect(plan().Items).To(ContainElement(And(waiting("cluster.x-k8s.io", "capi-only", "MachineSet capi-canary"),
			HaveField("Message", ContainSubstring("its machine failed on it: machine capi-canary-1: InvalidAMIID.NotFound")))))
	})
})
